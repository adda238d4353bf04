"""Elementwise functions with MegEngine's names (`F.add`, `F.relu`, ...)."""
from __future__ import annotations

from ..dispatch import apply
from ..ops.elemwise import BINARY_NAMES, UNARY_NAMES
from ..tensor import Tensor
from ._convert import binary_operands, cast, require_tensor

__all__ = list(UNARY_NAMES) + list(BINARY_NAMES)


def _make_unary(name: str):
    def fn(x) -> Tensor:
        x = require_tensor(name, x)
        if name not in ("relu", "neg", "abs", "square") and x.dtype.kind != "f":
            x = cast(x, "float32")
        return apply(name, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} (MegEngine `F.{name}`)."
    return fn


def _make_binary(name: str):
    def fn(x, y) -> Tensor:
        a, b = binary_operands(x, y)
        # true division and powers of ints give float32 (MegEngine's DIV/POW promote)
        if name in ("div", "pow") and a.dtype.kind != "f":
            a, b = cast(a, "float32"), cast(b, "float32")
        return apply(name, a, b)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} with broadcasting (MegEngine `F.{name}`)."
    return fn


for _n in UNARY_NAMES:
    globals()[_n] = _make_unary(_n)
for _n in BINARY_NAMES:
    globals()[_n] = _make_binary(_n)
