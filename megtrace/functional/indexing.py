"""`Tensor.__getitem__`: ints, slices, None, Ellipsis and one integer-tensor index."""
from __future__ import annotations

import numpy as np

from ..dispatch import apply
from ..errors import ShapeError
from ..tensor import Tensor


def _split_key(key, ndim: int):
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for a {ndim}-d tensor: {used} were indexed")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(k)
    return out + [slice(None)] * (ndim - sum(1 for k in out if k is not None))


def getitem(x: Tensor, key) -> Tensor:
    items = _split_key(key, x.ndim)
    rows, new_axes, tensor_index = [], [], None
    axis, out_axis = 0, 0
    for k in items:
        if k is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        if isinstance(k, Tensor) or (isinstance(k, (list, np.ndarray)) and not isinstance(k, bool)):
            if tensor_index is not None:
                raise NotImplementedError("indexing with more than one tensor is not supported")
            idx = k if isinstance(k, Tensor) else Tensor(np.asarray(k), dtype="int32")
            if idx.dtype.kind == "b":
                raise NotImplementedError("boolean mask indexing is not supported")
            tensor_index = (out_axis, idx)
            axis, out_axis = axis + 1, out_axis + 1
            continue
        size = x.shape[axis]
        if isinstance(k, slice):
            if k != slice(None):
                start, stop, step = k.indices(size)
                if step < 0 and stop < 0:
                    stop = None
                rows.append((axis, start, stop, step, None))
            axis, out_axis = axis + 1, out_axis + 1
        else:
            i = int(k)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
            rows.append((axis, None, None, None, i % size))
            axis += 1
    out = apply("subtensor", x, index=tuple(rows)) if rows else x
    if tensor_index is not None:
        ax, idx = tensor_index    # ax counts output axes; the None ones come later
        if idx.ndim != 1 and any(a > ax for a in new_axes):
            raise NotImplementedError("None after a multi-dimensional tensor index")
        out = apply("take", out, idx if idx.dtype == np.int32 else idx.astype("int32"),
                    axis=ax - sum(1 for a in new_axes if a < ax))
    if new_axes:
        out = apply("expand_dims", out, axis=tuple(new_axes))
    return out


def check_rank(name: str, x: Tensor, ndim: int) -> None:
    if x.ndim != ndim:
        raise ShapeError(f"{name}: expected a {ndim}-d tensor, got shape {x.shape}")
