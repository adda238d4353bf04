"""Turning MegEngine-style arguments (tensors, Python scalars, arrays) into Tensors."""
from __future__ import annotations

import numpy as np

from .. import dtype as _dt
from ..dispatch import apply
from ..ops import quantized_eager
from ..ops.quantized import spec as quantized_spec
from ..errors import DTypeError
from ..tensor import Tensor, constant

_F32 = np.dtype(np.float32)


def _f32_scalar(value: int | float) -> Tensor:
    """What Tensor(value, dtype=float32) makes of a Python number (as_array: asarray,
    then astype), without Tensor()'s checks: scalar operands of float32 ops."""
    return constant(np.asarray(value).astype(_F32))


def as_tensor(value, like: Tensor | None = None) -> Tensor:
    if isinstance(value, Tensor):
        return value
    kind = type(value)
    if (kind is float or kind is int) and like is not None and like.dtype is _F32:
        return _f32_scalar(value)
    if isinstance(value, np.generic) and like is not None and \
            not isinstance(value, (float, np.int64, np.uint64)):
        # a NumPy scalar is a typed operand (binary_operands promotes it as a tensor of
        # its dtype), except that an integer or bool beside floats takes their dtype
        # (MegEngine 1.13: uint8 * np.float32(1/255) is float32, float16 + np.int32(1)
        # float16); 64-bit ones are numbers (MegEngine refuses them)
        if value.dtype.kind in "iub" and like.dtype.kind == "f":
            return Tensor(value, dtype=like.dtype)
        return Tensor(value)
    if isinstance(value, (bool, int, float, np.generic)) and like is not None:
        if isinstance(value, float) and not _dt.is_float(_dt.name_of(like.dtype)):
            return Tensor(value, dtype="float32")
        if like.dtype.kind == "b" and not isinstance(value, (bool, np.bool_)):
            # a number beside a mask is a number (int32 here, then float32 with the mask:
            # MegEngine's `1 - mask` is [0., 1.], not a boolean subtraction)
            return Tensor(value, dtype="int32")
        return Tensor(value, dtype=like.dtype)
    return Tensor(value)


def cast(x: Tensor, dtype: str) -> Tensor:
    if _dt.name_of(x.dtype) == dtype:
        return x
    if x.dtype.metadata:        # MegEngine's quantized dtypes: dequantized by TypeCvt
        return apply("quantized_astype", x, dtype=dtype)
    return apply("astype", x, dtype=dtype)


def binary_operands(a, b) -> tuple[Tensor, Tensor]:
    """Promote a pair the way MegEngine does: scalars take the tensor's dtype (a number
    beside a mask: int32); mixed tensors promote (dtype.promote_elementwise), inserting a
    TypeCvt."""
    if isinstance(a, Tensor):
        if isinstance(b, Tensor):
            if a.dtype is b.dtype is _F32:
                return a, b     # two float32 tensors: what the rules below return
        elif (type(b) is float or type(b) is int) and a.dtype is _F32:
            return a, _f32_scalar(b)        # as as_tensor(b, a) makes it
    elif (type(a) is float or type(a) is int) and isinstance(b, Tensor) and b.dtype is _F32:
        return _f32_scalar(a), b
    if a is None or b is None:
        raise TypeError("the operand is None and is not supported.")
    quantized = _quantized_pair(a, b)
    if quantized is not None:
        return quantized
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = Tensor(a)
    a = as_tensor(a, b if isinstance(b, Tensor) else None)
    b = as_tensor(b, a)
    da, db = _dt.name_of(a.dtype), _dt.name_of(b.dtype)
    dtype = _dt.promote_elementwise(da, db)
    if da == dtype and db == dtype:     # the common case: nothing to convert
        return a, b
    return cast(a, dtype), cast(b, dtype)


def require_tensor(name: str, value) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic, list, tuple, int, float)):
        return Tensor(value)
    raise DTypeError(f"{name}: expected a Tensor, got {type(value).__name__}")


def _quantized_pair(a, b):
    """MegEngine's promotion with one quantized operand: the other one (a tensor or a
    float) is converted to that quantized dtype (TypeCvt: quantized), a Python int is
    taken as a stored value. None when neither operand is quantized."""
    qa = _dt._quantized(a.dtype) if isinstance(a, Tensor) else None
    qb = _dt._quantized(b.dtype) if isinstance(b, Tensor) else None
    if qa is None and qb is None:
        return None
    if qa is not None and qb is not None:
        return a, b          # both quantized: the operator checks they agree

    def to(value, qdtype, like):
        if isinstance(value, (bool, int, np.integer)):     # MegEngine: stored as it is
            return Tensor(value, dtype=qdtype, device=like.device)
        if isinstance(value, Tensor):       # a TypeCvt (recorded when traced)
            return apply("quantized_astype", value, dtype=quantized_spec(qdtype))
        arr = np.asarray(value, np.float32)
        return Tensor._wrap(quantized_eager.typecvt(arr, qdtype), device=like.device)
    return (a, to(b, qa, a)) if qa is not None else (to(a, qb, b), b)
