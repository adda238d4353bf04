"""MegEngine's eye, diag, gather, scatter, cond_take, copy, swapaxes, roll, repeat and
tile. roll/repeat/tile compose slicing, concat, reshape and broadcast as MegEngine 1.13
does, so they trace, compile and dump with those ops."""
from __future__ import annotations

from typing import Iterable, Optional, Union

import numpy as np

from .. import dtype as _dt
from ..dispatch import apply
from ..tensor import Tensor
from ._convert import require_tensor
from .tensor_ops import _on, broadcast_to, concat, reshape, split, transpose

__all__ = ["eye", "diag", "gather", "scatter", "cond_take", "copy", "swapaxes", "roll",
           "repeat", "tile", "meshgrid"]


def _ints(value) -> list[int]:
    if isinstance(value, Tensor):
        return [int(v) for v in np.atleast_1d(value.numpy())]
    if isinstance(value, (int, np.integer)):
        return [int(value)]
    return [int(v.item() if isinstance(v, Tensor) else v) for v in value]


def eye(N, M: int = None, *, dtype="float32", device=None) -> Tensor:
    """A 2-d tensor with ones on the diagonal. `N` may be a shape (rows, cols) or a Tensor
    holding one."""
    shape = _ints(N) + ([] if M is None else _ints(M))
    if len(shape) not in (1, 2):
        raise ValueError(f"eye: expected one or two sizes, got {shape}")
    rows, cols = shape[0], shape[-1]
    return Tensor(np.eye(rows, cols), dtype=_dt.canonical(dtype), device=device)


def diag(inp: Tensor, k: int = 0) -> Tensor:
    """The k-th diagonal of a 2-d tensor, or a square matrix with a 1-d tensor on it."""
    return apply("diag", require_tensor("diag", inp), k=int(k))


def gather(inp: Tensor, axis: int, index: Tensor) -> Tensor:
    """out[i][j][k] = inp[index[i][j][k]][j][k] (axis 0; likewise for other axes)."""
    x, idx = require_tensor("gather", inp), require_tensor("gather", index)
    if x.ndim != idx.ndim:
        raise ValueError("The index tensor must have same dimensions as input tensor, But "
                         f"the input dims:{x.ndim}, the index dims:{idx.ndim}")
    return apply("gather", x, _int32(idx), axis=int(axis))


def scatter(inp: Tensor, axis: int, index: Tensor, source: Tensor) -> Tensor:
    """inp with inp[index[i][j][k]][j][k] = source[i][j][k] (axis 0; likewise for others),
    written into `inp` itself and returned, as MegEngine's (`inp[idx] = source`)."""
    x, idx, src = (require_tensor("scatter", t) for t in (inp, index, source))
    if not x.ndim == idx.ndim == src.ndim:
        raise ValueError("The input, source and index tensor must have same dimensions")
    for i in range(src.ndim):
        if src.shape[i] > x.shape[i]:
            raise ValueError(f"The each shape size for source {src.shape} must be less than "
                             f"or equal to input {x.shape} ")
        if idx.shape[i] != src.shape[i]:
            raise ValueError(f"The each shape size for index {idx.shape} must be equal to "
                             f"source {src.shape} ")
    if src.dtype != x.dtype:
        src = src.astype(x.dtype)
    out = apply("scatter", x, _int32(idx), src, axis=int(axis))
    if x is not inp:            # an array given: MegEngine's setitem would fail on it
        return out
    inp._reset(out)
    return inp


def _int32(t: Tensor) -> Tensor:
    return t if t.dtype == np.int32 else t.astype("int32")


def cond_take(mask: Tensor, x: Tensor):
    """(x[mask], flat int32 indices of the True elements), both 1-d (MegEngine's
    CondTake). Their size depends on the mask's values: a traced graph holding it runs on
    the NumPy interpreter (compiled graphs have static shapes) and dumps as CondTake."""
    if not isinstance(x, Tensor):
        raise TypeError("input must be a tensor")
    if not isinstance(mask, Tensor):
        raise TypeError("mask must be a tensor")
    if mask.dtype != np.bool_:
        raise ValueError("mask must be bool")
    if x.device != mask.device:
        raise ValueError("ambiguous device: {} vs {}".format(x.device, mask.device))
    return apply("cond_take", x, mask)


def copy(inp: Tensor, device=None) -> Tensor:
    """A copy of `inp` (on `device` when given)."""
    return _on(apply("copy", require_tensor("copy", inp)), device)


def swapaxes(inp: Tensor, axis1: int, axis2: int) -> Tensor:
    """Exchange two axes."""
    x = require_tensor("swapaxes", inp)
    pattern = list(range(x.ndim))
    pattern[axis1], pattern[axis2] = pattern[axis2], pattern[axis1]
    return transpose(x, pattern)


def roll(inp: Tensor, shift: Union[int, Iterable[int]],
         axis: Optional[Union[int, Iterable[int]]] = None) -> Tensor:
    """Rotate elements along `axis` (of the flattened tensor when None) by `shift`."""
    x = require_tensor("roll", inp)
    original = None
    if axis is None:
        original, x, axis = x.shape, reshape(x, (-1,)), 0
    if isinstance(shift, int):
        assert isinstance(axis, int)
        shift, axis = [shift], [axis]
    shift, axis = list(shift), list(axis)
    assert len(shift) == len(axis)
    dim = x.ndim
    out = x
    for s, a in zip(shift, axis):
        ax = a + dim if a < 0 else a
        assert dim > ax >= 0, (f"axis out of range (expected to be in range of "
                               f"[{-dim}, {dim - 1}], but got {a})")
        size = x.shape[ax]
        s = 0 if size == 0 else s % size
        if s == 0:
            continue
        head, tail = split(out, [size - s], axis=ax)
        out = concat((tail, head), axis=ax)
    return out if original is None else reshape(out, original)


def repeat(inp: Tensor, repeats: int, axis: Optional[int] = None) -> Tensor:
    """Repeat each element `repeats` times along `axis` (of the flattened tensor if None)."""
    x = require_tensor("repeat", inp)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    shape = list(x.shape)
    assert 0 <= axis <= len(shape) - 1
    assert repeats >= 1
    base = shape[:axis + 1] + [1] + shape[axis + 1:]
    wide = shape[:axis + 1] + [repeats] + shape[axis + 1:]
    target = shape[:axis] + [shape[axis] * repeats] + shape[axis + 1:]
    return reshape(broadcast_to(reshape(x, base), wide), target)


def tile(inp: Tensor, reps: Iterable[int]) -> Tensor:
    """Repeat the whole tensor `reps[i]` times along axis i (leading extra reps add axes)."""
    x = require_tensor("tile", inp)
    reps = _ints(reps)
    assert len(reps) >= x.ndim, \
        "Number of dimensions of tiled dims can not be smaller than number of dimensions of tensor"
    shape = [1] * (len(reps) - x.ndim) + list(x.shape)
    x = reshape(x, shape) if len(shape) != x.ndim else x
    base, wide = [], []
    for r, d in zip(reps, shape):
        base += [1, d]
        wide += [r, d]
    out = broadcast_to(reshape(x, base), wide)
    return reshape(out, [r * d for r, d in zip(reps, shape)])


def meshgrid(*inputs: Tensor, indexing: str = "xy") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-d tensors: 'xy' puts the first input along columns, 'ij'
    along rows (as NumPy's meshgrid). A tuple, as MegEngine's (an op's outputs)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [require_tensor("meshgrid", t) for t in inputs]
    for t in xs:
        if t.ndim > 1:
            raise ValueError(f"meshgrid: inputs must be 0-d or 1-d, got shape {t.shape}")
    sizes = [t.size for t in xs]
    if indexing == "xy" and len(xs) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, t in enumerate(xs):
        place = i if indexing == "ij" or len(xs) < 2 else {0: 1, 1: 0}.get(i, i)
        shape = [1] * len(xs)
        shape[place] = t.size
        out.append(broadcast_to(reshape(t, shape), sizes))
    return tuple(out)
