"""Ops whose output shape depends on the input values (MegEngine's CondTake).

A compiled graph has static shapes, so these ops are `value_shaped`: their shape rule
gives the largest possible shapes, a trace records the shapes the values had, and a
graph holding one runs on the NumPy interpreter (where every shape is the real one).
They are still written to .mge files as MegEngine's own oprs, which Lite runs.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from .registry import MgeOpr, OpDef, register


# -- cond_take: (x[mask], flat indices of mask's true elements) ---------------------------
def _cond_take_infer(x, mask):
    if mask.dtype != "bool":
        raise DTypeError(f"cond_take: mask must be bool; got {mask}")
    if x.shape != mask.shape:
        raise ShapeError(f"cond_take: mask shape {mask.shape} differs from input shape "
                         f"{x.shape}")
    return TensorType((x.size,), x.dtype), TensorType((x.size,), "int32")


def _cond_take_eager(x, mask):
    _cond_take_infer(TensorType.of(x), TensorType.of(mask))
    flat = np.asarray(mask).reshape(-1)
    return np.asarray(x).reshape(-1)[flat], np.flatnonzero(flat).astype(np.int32)


# MegEngine writes CondTake(data, mask) with mode EQ, val 1 (mask == 1 selects).
COND_TAKE = MgeOpr("CondTake", "CondTake", fields=lambda p: {"mode": 0, "val": 1.0,
                                                             "eps": 1e-6},
                   decode=lambda f: {}, outputs=2, results=(0, 1))

def _cond_take_vjp(V, inputs, outputs, grads):
    """The taken values' gradient goes back to their flat positions (MegEngine's CondTake
    rule); the mask and the indices have none."""
    (x, _), (_, index), (g, _) = inputs, outputs, grads
    if g is None:
        return None, None
    flat = V.apply("broadcast_to", V.const(0, g), shape=(x.size,))
    flat = V.apply("indexing_incr_multi_axis_vec", flat, g, index, axes=(0,))
    return V.apply("reshape", flat, shape=tuple(x.shape)), None


register(OpDef("cond_take", eager=_cond_take_eager, infer=_cond_take_infer,
               interpreted=True, value_shaped=True, mge=COND_TAKE, vjp=_cond_take_vjp))
