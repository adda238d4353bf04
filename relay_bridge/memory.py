"""Measured peak memory of one run of a compiled graph (Linux): what the memory options
of `trace` (sublinear_memory_config, dtr_config) are judged by.

The run gets a fresh Relax VM with TVM's naive allocator, so every storage the static
memory plan asks for is allocated during the run and freed when the plan kills it (the
default pooled allocator keeps storage from earlier runs). The process's resident-set
high-water mark is reset first (/proc/self/clear_refs), so the figure is the growth of
resident memory during this run alone: the plan's storage, the outputs and the kernels'
scratch. Large allocations must map fresh pages for the figure to mean anything: run it
in a process started with MALLOC_MMAP_THRESHOLD_ set (bench/bench_memory.py does).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ._tvm import relax, tvm


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    """Make VmHWM (the peak resident set) restart from the current resident set."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_run_bytes(compiled, arrays: Sequence[np.ndarray]) -> int:
    """Bytes the resident set grew by, at its peak, while `compiled` (a CompiledGraph
    for this CPU) ran once on `arrays`."""
    return peak_run_memory(compiled, arrays)[0]


def peak_run_memory(compiled, arrays: Sequence[np.ndarray]) -> tuple[int, int]:
    """(growth, process peak): the bytes the resident set grew by at its peak while
    `compiled` ran once on `arrays` (what the run added to what was resident before it:
    parameters, optimizer state and inputs are, as `arrays`), and the whole process's
    resident-set peak during the run. A donated input (donate.py) is written over, as
    the trace's run writes over its own copy."""
    t = tvm()
    dev = t.cpu(0)
    vm = relax().VirtualMachine(compiled.executable, dev, memory_cfg="naive")
    args = [t.runtime.tensor(np.array(a, order="C"), dev) for a in arrays]
    main = vm["main"]
    reset_peak_rss()
    before = _status_kib("VmRSS")
    result = main(*args)
    peak = _status_kib("VmHWM")
    del result
    return (peak - before) * 1024, peak * 1024
