"""`V`, the toolbox every `OpDef.vjp` receives: Tensor-level operations only, so that a
backward pass records, traces and compiles like any other computation (op files never
import the Tensor layer themselves, as `lower` rules never import TVM)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import functional as F
from ..dispatch import apply
from ..tensor import Tensor, constant

_F32 = np.dtype(np.float32)


class VjpContext:
    """Helpers for gradient rules; `V.apply(op, *xs, **params)` is dispatch.apply.
    `V.needs_grad(i)`: whether input i's gradient is wanted (a rule may skip the others
    and return None for them)."""

    F = F

    def __init__(self, wanted: tuple[bool, ...] | None = None):
        self._wanted = wanted

    def needs_grad(self, i: int) -> bool:
        return self._wanted is None or self._wanted[i]

    @staticmethod
    def apply(op: str, *inputs: Tensor, **params: Any):
        return apply(op, *inputs, **params)

    @staticmethod
    def const(value, like: Tensor) -> Tensor:
        """A scalar constant of `like`'s dtype (broadcasts in elementwise ops)."""
        dtype = like.dtype
        array = np.asarray(value, dtype=dtype)
        if dtype is _F32:       # Tensor() of a float32 array changes nothing: skip its checks
            return constant(array, like.device)
        return Tensor(array, device=like.device)

    @staticmethod
    def zeros_like(x: Tensor) -> Tensor:
        return apply("broadcast_to", VjpContext.const(0, x), shape=tuple(x.shape))

    @staticmethod
    def cast(x: Tensor, like: Tensor) -> Tensor:
        """`x` in `like`'s dtype (the identity when it already is)."""
        return x if x.dtype == like.dtype else apply("astype", x, dtype=like.dtype.name)

    @staticmethod
    def select(cond: Tensor, g: Tensor, other: Tensor | None = None) -> Tensor:
        """`g` where `cond` holds, else `other` (zero): MegEngine's SWITCH/COND_MOV."""
        if other is None:
            other = VjpContext.const(0, g)
        return apply("where", cond, g, other)

    @staticmethod
    def sum_to(g: Tensor, shape) -> Tensor:
        """Reduce a gradient broadcast from `shape` back to `shape` (sum over the axes that
        broadcasting added or stretched)."""
        shape = tuple(shape)
        if tuple(g.shape) == shape:
            return g
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
        if axes:
            g = apply("reduce", g, mode="sum", axis=axes, keepdims=True)
        return g if tuple(g.shape) == shape else apply("reshape", g, shape=shape)

