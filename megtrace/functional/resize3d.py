"""Trilinear resizing of NCDHW volumes, computed as MegEngine's Resize3D kernel does
(linear taps per axis, separable), composed of index gathers and elementwise ops so that
it traces, compiles and dumps (as IndexingMultiAxisVec and Elemwise oprs; megtrace's copy
of MegEngine's schema has no Resize3D param fields to write that opr)."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor


def _taps(in_size: int, out_size: int, align_corners: bool):
    """Per output index: the two source indices and the second one's weight (float32,
    MegEngine's pixel_get_src_index: corner-aligned, or half-pixel clamped at 0)."""
    if align_corners:
        scale = np.float32((in_size - 1) / (out_size - 1)) if out_size > 1 else np.float32(0)
        src = scale * np.arange(out_size, dtype=np.float32)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
        src = scale * (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5)
        src = np.maximum(src, np.float32(0))
    first = src.astype(np.int64)
    second = first + (first < in_size - 1)
    return first.astype(np.int32), second.astype(np.int32), (src - first).astype(np.float32)


def _resize_axis(x: Tensor, axis: int, out_size: int, align_corners: bool) -> Tensor:
    first, second, weight = _taps(x.shape[axis], out_size, align_corners)
    if out_size == x.shape[axis] and not weight.any() and \
            np.array_equal(first, np.arange(out_size)):
        return x                                   # same size, half-pixel: identity
    lead = (slice(None),) * axis
    shape = [1] * x.ndim
    shape[axis] = out_size
    w1 = Tensor(weight.reshape(shape))
    w0 = Tensor((np.float32(1) - weight).reshape(shape))
    return x[lead + (first,)] * w0 + x[lead + (second,)] * w1


def trilinear(x: Tensor, size: tuple[int, int, int], align_corners: bool) -> Tensor:
    """x (N, C, D, H, W) resized to `size` (D, H, W): width, then height, then depth,
    the order in which MegEngine's kernel nests its taps."""
    if any(s <= 0 for s in size):
        raise ValueError(f"interpolate: output size must be positive; got {size}")
    for axis, out_size in ((4, size[2]), (3, size[1]), (2, size[0])):
        x = _resize_axis(x, axis, out_size, align_corners)
    return x
