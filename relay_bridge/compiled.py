"""What a build gives back: a graph compiled by TVM (run by the Relax VM), or one that
megtrace's NumPy interpreter runs. Its own module so that everything that hands out or
takes compiled graphs (build, tuning, export) imports it without importing the others."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from megtrace.interpreter import run
from megtrace.ir import Graph

from ._tvm import relax, tvm


@dataclass
class CompiledGraph:
    """A graph compiled by TVM: call it with NumPy arrays, get a list of NumPy arrays.
    The VM is created on first call, so graphs built for other machines (aarch64, CUDA
    here) can still be inspected and exported.

    Calls may come from several threads at once: a Relax VM keeps its registers and
    output storage between calls, so each thread gets its own VM and staging buffers
    (the executable and its kernels are shared)."""

    graph: Graph
    target: Any
    executable: Any
    build_seconds: float
    rules: list[str] = field(default_factory=list)   # CPU rule kernels used (llvm only)
    pipeline: str = "default"                         # "cpu-rules", "default", "fused", "plain"
    kernels: list[str] = field(default_factory=list)  # TIR functions after fusion

    def __post_init__(self):
        kind = self.target.kind.name
        self._device = tvm().cpu(0) if kind == "llvm" else tvm().device(kind, 0)
        self._per_thread = threading.local()

    @property
    def _main(self):
        """This thread's VM entry function (created on the thread's first call)."""
        state = self._per_thread
        main = getattr(state, "main", None)
        if main is None:
            state.vm = relax().VirtualMachine(self.executable, self._device)
            state.main = main = state.vm["main"]
            state.staging = {}
        return main

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        main = self._main
        if self.target.kind.name != "llvm":
            t = tvm()
            args = [t.runtime.tensor(np.ascontiguousarray(a), self._device) for a in arrays]
            return [r.numpy() for r in main(*args)]
        result = main(*[self._host_tensor(i, a) for i, a in enumerate(arrays)])
        # Copy out through DLPack (a VM may reuse its output storage on the next call).
        return [np.from_dlpack(r).copy() for r in result]

    def _host_tensor(self, slot: int, array: np.ndarray):
        """Hand a CPU array to the VM without tvm.runtime.tensor's allocation (~25 us):
        zero-copy when it is 64-byte aligned (TVM's DLPack rule), else through a reused
        aligned staging buffer of this thread."""
        array = np.asarray(array)
        if array.size == 0:     # NumPy gives empty arrays unaligned data pointers
            return tvm().runtime.tensor(array, self._device)
        if not (array.flags.c_contiguous and array.ctypes.data % 64 == 0):
            staging = self._per_thread.staging
            buf = staging.get(slot)
            if buf is None or buf.shape != array.shape or buf.dtype != array.dtype:
                buf = _aligned_empty(array.shape, array.dtype)
                staging[slot] = buf
            np.copyto(buf, array)
            array = buf
        return tvm().runtime.from_dlpack(array)


@dataclass
class InterpretedGraph:
    """A graph with 0-size values or ops without a Relax lowering, run by megtrace's NumPy
    interpreter: TVM cannot hold 0-size values (0-size constants do not load back from an
    executable, DLPack refuses 0-size NumPy buffers, Relax reshape reads a 0 in a target
    shape as "keep that axis"), and Relax has no matrix inverse or SVD."""

    graph: Graph
    target: Any
    executable: Any = None
    build_seconds: float = 0.0
    rules: list[str] = field(default_factory=list)
    pipeline: str = "numpy-interpreter"
    kernels: list[str] = field(default_factory=list)

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(v) for v in run(self.graph, *arrays)]


def _aligned_empty(shape, dtype, align: int = 64) -> np.ndarray:
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)
