"""Reductions with MegEngine's names: `F.sum`, `F.mean`, `F.max`, `F.min`, `F.prod`."""
from __future__ import annotations

from ..dispatch import apply
from ..tensor import Tensor
from ._convert import cast, require_tensor

__all__ = ["sum", "mean", "max", "min", "prod"]


def _make(mode: str):
    def fn(inp: Tensor, axis=None, keepdims: bool = False) -> Tensor:
        x = require_tensor(mode, inp)
        if mode == "mean" and x.dtype.name != "float32":
            x = cast(x, "float32")      # MegEngine's reduce_rule: a MEAN runs in float32
        elif x.dtype.kind == "b" and mode in ("sum", "prod"):
            x = cast(x, "int32")
        ax = None if axis is None else (tuple(int(a) for a in axis)
                                        if isinstance(axis, (tuple, list)) else int(axis))
        if isinstance(ax, tuple):
            assert len({a % x.ndim if x.ndim else a for a in ax}) == len(ax), \
                f"axis {tuple(axis)} contains duplicated indices"
        return apply("reduce", x, mode=mode, axis=ax, keepdims=bool(keepdims))
    fn.__name__ = fn.__qualname__ = mode
    fn.__doc__ = f"Reduce by {mode} over `axis` (all axes when None)."
    return fn


sum, mean, max, min, prod = (_make(m) for m in __all__)  # noqa: A001
