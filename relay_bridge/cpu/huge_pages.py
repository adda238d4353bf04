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
"""
from __future__ import annotations

import mmap
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


def constant(array: np.ndarray) -> Any:
    """A tvm.runtime.Tensor with `array`'s contents, in huge pages when that applies,
    else `array` itself (for rx.const to copy as usual)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = _available()
    if not _AVAILABLE or array.nbytes < HUGE:
        return array
    size = -(-array.nbytes // HUGE) * HUGE + HUGE       # room to align the start
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(region, dtype=np.uint8)
    start = -raw.ctypes.data % HUGE
    try:
        region.madvise(mmap.MADV_HUGEPAGE, start, size - start)
    except OSError:
        return array
    out = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array                   # the first touch: faults in huge pages
    return tvm().runtime.from_dlpack(out)   # keeps `out`, hence the mapping, alive
