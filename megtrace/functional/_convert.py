"""Turning MegEngine-style arguments (tensors, Python scalars, arrays) into Tensors."""
from __future__ import annotations

import numpy as np

from .. import dtype as _dt
from ..dispatch import apply
from ..errors import DTypeError
from ..tensor import Tensor


def as_tensor(value, like: Tensor | None = None) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float, np.generic)) and like is not None:
        if isinstance(value, float) and not _dt.is_float(_dt.name_of(like.dtype)):
            return Tensor(value, dtype="float32")
        return Tensor(value, dtype=like.dtype)
    return Tensor(value)


def cast(x: Tensor, dtype: str) -> Tensor:
    return x if _dt.name_of(x.dtype) == dtype else apply("astype", x, dtype=dtype)


def binary_operands(a, b) -> tuple[Tensor, Tensor]:
    """Promote a pair the way MegEngine does: scalars take the tensor's dtype; mixed
    tensors promote (float wins), inserting a TypeCvt."""
    if a is None or b is None:
        raise TypeError("the operand is None and is not supported.")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = Tensor(a)
    a = as_tensor(a, b if isinstance(b, Tensor) else None)
    b = as_tensor(b, a)
    da, db = _dt.name_of(a.dtype), _dt.name_of(b.dtype)
    dtype = _dt.promote(da, db)
    if da == dtype and db == dtype:     # the common case: nothing to convert
        return a, b
    return cast(a, dtype), cast(b, dtype)


def require_tensor(name: str, value) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, list, tuple, int, float)):
        return Tensor(value)
    raise DTypeError(f"{name}: expected a Tensor, got {type(value).__name__}")
