"""Elementwise functions with MegEngine's names (`F.add`, `F.relu`, ...)."""
from __future__ import annotations

import numpy as np

from ..dispatch import apply
from ..ops import quantized_eager as Q
from ..ops.elemwise import BINARY_NAMES, UNARY_NAMES
from ..tensor import Tensor
from ._convert import binary_operands, cast, require_tensor
from ..ops.quantized import spec as quantized_spec

__all__ = list(UNARY_NAMES) + list(BINARY_NAMES)


def _make_unary(name: str):
    keeps_dtype = name in ("relu", "neg", "abs", "square")
    # MegEngine: int32 in, int32 out (relu6 keeps int8/int16/uint8 too)
    keeps_integers = name in ("floor", "ceil", "round", "relu6")

    def fn(x) -> Tensor:
        if not isinstance(x, Tensor):
            x = require_tensor(name, x)
        if not keeps_dtype and x.dtype.kind != "f" and not (
                keeps_integers and x.dtype.kind in "iu" and Q.mgb_meta(x.dtype) is None):
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


# MegEngine's Elemwise mode names that megtrace's functionals spell differently
_MODE_ALIASES = {"true_div": "div"}


def _elwise(*args, mode: str) -> Tensor:
    """MegEngine's `functional.elemwise._elwise`: the Elemwise operator `mode` (its
    name, any case) on the arguments."""
    name = _MODE_ALIASES.get(str(mode).lower(), str(mode).lower())
    fn = globals().get(name) if name in __all__ else None
    if fn is not None:
        return fn(*args)
    tensors = [a if isinstance(a, Tensor) else Tensor(a) for a in args]
    if len(tensors) == 2:
        tensors = list(binary_operands(*tensors))
    return apply(name, *tensors)


def _elemwise_multi_type(*args, mode: str, dtype=None) -> Tensor:
    """MegEngine's ElemwiseMultiType in its quantized modes ("qadd", "qrelu",
    "qfuse_add_relu", ...): the inputs dequantized, the float32 Elemwise `mode[1:]`
    computed, the result quantized to `dtype` (round half away, saturated)."""
    mode = str(mode).lower()
    if not mode.startswith("q"):
        raise NotImplementedError(f"_elemwise_multi_type: mode {mode!r}; megtrace runs the "
                                  "quantized modes ('q' + an Elemwise mode)")
    if dtype is None or Q.mgb_meta(np.dtype(dtype)) is None:
        raise ValueError(f"_elemwise_multi_type: dtype must be a quantized dtype; got {dtype!r}")
    for a in args:
        if not isinstance(a, Tensor) or Q.mgb_meta(a.dtype) is None:
            raise TypeError(f"_elemwise_multi_type: {mode} takes quantized tensors; got "
                            f"{getattr(a, 'dtype', type(a).__name__)}")
    return apply("quantized_elemwise", *args, mode=mode, dtype=quantized_spec(dtype))
