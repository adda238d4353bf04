"""MegEngine's trigonometric/hyperbolic functions, sign, atan2, logaddexp, bit shifts,
isnan and isinf (`F.tan`, `F.atanh`, `F.isnan`, ...)."""
from __future__ import annotations

import numpy as np

from ..dispatch import apply
from ..tensor import Tensor
from ._convert import binary_operands, cast, require_tensor
from .tensor_ops import broadcast_to

__all__ = ["tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh",
           "atanh", "sign", "logaddexp", "left_shift", "right_shift", "isnan", "isinf"]


def _as_float(x: Tensor) -> Tensor:
    """MegEngine computes float-only Elemwise modes of integer tensors in float32."""
    return x if x.dtype.kind == "f" else cast(x, "float32")


def _float_unary(name: str):
    def fn(x) -> Tensor:
        return apply(name, _as_float(require_tensor(name, x)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} (MegEngine `F.{name}`); integers compute in float32."
    return fn


tan, asin, acos, sinh, cosh, asinh, acosh, atanh = (
    _float_unary(n) for n in ("tan", "asin", "acos", "sinh", "cosh", "asinh", "acosh",
                              "atanh"))


def atan2(y, x) -> Tensor:
    """Element-wise arc tangent of y / x, in the quadrant of (x, y)."""
    a, b = binary_operands(y, x)
    return apply("atan2", _as_float(a), _as_float(b))


def atan(x) -> Tensor:
    """Element-wise arc tangent; MegEngine computes it as atan2(x, 1)."""
    x = _as_float(require_tensor("atan", x))
    return apply("atan2", x, Tensor(np.ones((), x.dtype)))


def sign(x) -> Tensor:
    """-1, 0 or 1 by the sign of each element; integer tensors stay integer."""
    x = require_tensor("sign", x)
    if x.dtype.kind == "b":
        x = cast(x, "int32")
    return apply("sign", x)


def logaddexp(x, y) -> Tensor:
    """log(exp(x) + exp(y)), element-wise and without overflow."""
    a, b = binary_operands(x, y)
    return apply("logaddexp", _as_float(a), _as_float(b))


def _shift(name: str):
    def fn(x, y) -> Tensor:
        a, b = binary_operands(x, y)
        return apply(name, a, b)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise bit {name.replace('_', ' ')} of integer tensors."
    return fn


left_shift, right_shift = _shift("left_shift"), _shift("right_shift")


def _check(name: str):
    def fn(inp) -> Tensor:
        x = require_tensor(name, inp)
        if x.dtype.kind != "f":      # integers are never NaN nor infinite
            return broadcast_to(Tensor(False), x.shape)
        return apply(name, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} test; a bool tensor."
    return fn


isnan, isinf = _check("isnan"), _check("isinf")
