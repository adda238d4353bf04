"""Shared by the benchmark workers: one timing method for every runtime, peak memory,
and the line a worker prints its result on. Standalone (stdlib only), because the
torch/ONNX Runtime worker runs in another Python environment."""
from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from typing import Any, Callable

RESULT = "BENCH-RESULT "


def median_seconds(fn: Callable[[], Any], min_time: float = 1.0, min_iters: int = 5,
                   max_iters: int = 300, warmup: int = 2) -> tuple[float, int]:
    """(median seconds per call, calls timed): warm-up calls, then calls until both
    `min_time` has passed and `min_iters` calls were made."""
    wall, _cpu, n = median_wall_cpu(fn, min_time, min_iters, max_iters, warmup)
    return wall, n


def median_wall_cpu(fn: Callable[[], Any], min_time: float = 1.0, min_iters: int = 5,
                    max_iters: int = 300, warmup: int = 2) -> tuple[float, float, int]:
    """(median wall seconds, median CPU seconds of this process, calls timed) per call.

    CPU time counts every thread of the process, so with one thread it is the time the
    call computed, whatever else the machine ran meanwhile: on a loaded machine it is
    the figure that compares runtimes (with several threads it also counts spinning)."""
    for _ in range(warmup):
        fn()
    wall: list[float] = []
    cpu: list[float] = []
    start = time.perf_counter()
    while len(wall) < max_iters and (len(wall) < min_iters
                                     or time.perf_counter() - start < min_time):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return statistics.median(wall), statistics.median(cpu), len(wall)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB.

    Linux keeps getrusage's ru_maxrss across execve, so a worker started by a big
    coordinator would report the coordinator's peak; VmHWM belongs to the new address
    space. getrusage is the fallback elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def emit(**result: Any) -> None:
    """Hand the result to the coordinator (the last such line on stdout wins)."""
    result.setdefault("peak_mb", round(peak_rss_mb(), 1))
    print(RESULT + json.dumps(result), flush=True)


def parse(stdout: str) -> dict[str, Any] | None:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(RESULT)]
    return json.loads(lines[-1][len(RESULT):]) if lines else None


def fail(message: str) -> None:
    emit(error=message)
    sys.exit(0)
