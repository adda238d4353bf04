"""Shape functions with MegEngine's names (`F.reshape`, `F.flatten`, `F.concat`)."""
from __future__ import annotations

from typing import Sequence

from .. import dtype as _dt
from ..dispatch import apply
from ..tensor import Tensor
from ._convert import cast, require_tensor

__all__ = ["reshape", "flatten", "concat", "astype"]


def reshape(inp: Tensor, target_shape: Sequence[int] | int) -> Tensor:
    """Reshape to `target_shape`; one entry may be -1."""
    shape = (target_shape,) if isinstance(target_shape, int) else tuple(target_shape)
    return apply("reshape", require_tensor("reshape", inp), shape=tuple(int(d) for d in shape))


def flatten(inp: Tensor, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """Merge axes `start_axis..end_axis` into one."""
    return apply("flatten", require_tensor("flatten", inp), start_axis=int(start_axis),
                 end_axis=int(end_axis))


def concat(inps: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis."""
    tensors = [require_tensor("concat", t) for t in inps]
    return apply("concat", *tensors, axis=int(axis))


def astype(x: Tensor, dtype) -> Tensor:
    """Convert to `dtype` (MegEngine's `Tensor.astype`; a TypeCvt operator)."""
    return cast(require_tensor("astype", x), _dt.canonical(dtype))


def _axis_tuple(axis) -> tuple[int, ...]:
    return tuple(int(a) for a in axis) if isinstance(axis, (tuple, list)) else (int(axis),)


def expand_dims(inp: Tensor, axis) -> Tensor:
    """Insert size-1 axes at `axis` (an int or a sequence, positions in the result)."""
    return apply("expand_dims", require_tensor("expand_dims", inp), axis=_axis_tuple(axis))


def squeeze(inp: Tensor, axis=None) -> Tensor:
    """Remove size-1 axes (all of them when `axis` is None)."""
    inp = require_tensor("squeeze", inp)
    axes = tuple(i for i, d in enumerate(inp.shape) if d == 1) if axis is None else \
        _axis_tuple(axis)
    return apply("squeeze", inp, axis=axes)
