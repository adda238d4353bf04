"""Packed weights in transparent huge pages, where the kernel lets a process ask for them.

A GEMM at batch 1 streams every weight panel once per call, 4 KB page after 4 KB page;
with the same weights in 2 MB pages the encoder's four GEMMs ran 1-5% faster on a host
whose THP mode is `madvise` (mmap + MADV_HUGEPAGE before the first touch); conv weights
(packed for the direct rule or Winograd-transformed) stream the same way at batch 1, and
ResNet-18's 256-channel Winograd convs ran 4.1 -> 3.2 ms, its 512-channel direct convs
6.3-6.8 -> 5.7-5.9 ms (three each, in the model, Xeon host). TVM allocates
constants itself, so a weight that should live there is handed to Relax as a Tensor over
such a mapping (rx.const keeps the Tensor it is given). Weights under 2 MB, hosts without
THP or Python without madvise keep TVM's allocation.

The copy is the first touch: the kernel zeroes (and, on a busy host, compacts memory
for) each 2 MB page then, 0.07-0.25 s of CPU for ResNet-18's 67 MB of such weights,
a third of its lowering. A lowering makes them through a `Filler`, which copies on a
worker thread (NumPy's copy releases the GIL) while the lowering goes on, and waits
for the copies before handing the module on (issue 11: first call).
"""
from __future__ import annotations

import mmap
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .._tvm import tvm

HUGE = 2 << 20


def _available() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            mode = f.read()
    except OSError:
        return False
    return "[never]" not in mode and hasattr(mmap, "MADV_HUGEPAGE")


_AVAILABLE: bool | None = None


def _mapping(array: np.ndarray) -> np.ndarray | None:
    """An untouched array shaped as `array`, in a 2 MB-aligned mapping advised to use huge
    pages; None when that does not apply."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = _available()
    if not _AVAILABLE or array.nbytes < HUGE:
        return None
    size = -(-array.nbytes // HUGE) * HUGE + HUGE       # room to align the start
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(region, dtype=np.uint8)
    start = -raw.ctypes.data % HUGE
    try:
        region.madvise(mmap.MADV_HUGEPAGE, start, size - start)
    except OSError:
        return None
    return raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)


class Filler:
    """Makes the constants: each a tvm.runtime.Tensor with an array's contents in huge
    pages when that applies, else the array itself (for rx.const to copy as usual). The
    copies run on one worker thread; nothing may read the Tensors it returns before
    `wait()` (call it once, when the last constant is made)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []

    def constant(self, array: np.ndarray) -> Any:
        out = _mapping(array)
        if out is None:
            return array
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="megtrace-weights")
        self._pending.append(self._pool.submit(np.copyto, out, array))
        return tvm().runtime.from_dlpack(out)

    def wait(self) -> None:
        """Every copy done (the first failure raised); the worker thread ended."""
        pending, self._pending = self._pending, []
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for done in pending:
            done.result()
