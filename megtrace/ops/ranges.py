"""`linspace` of a length that a trace reads from an input's shape
(`F.linspace(0, 1, x.shape[0])`): the length is the op's `shape` param and, when traced,
its shape input, so the file writes MegEngine's Linspace opr with the length computed at
run time (GetVarShape -> Subtensor), as MegEngine's own dump does. A linspace of a plain
length is a constant and never becomes this op.
"""
from __future__ import annotations

import numpy as np

from ..ir import TensorType
from .registry import NOT_DIFFERENTIABLE, MgeComposite, OpDef, register
from .shape import check_shape_input
from .shape_emit import LINSPACE


def linspace32(start: float, stop: float, num: int) -> np.ndarray:
    """MegEngine's Linspace kernel: float32 ends, start + i * step computed in double."""
    start, stop = float(np.float32(start)), float(np.float32(stop))
    step = (stop - start) / max(num - 1, 1)
    return (start + np.arange(num, dtype=np.float64) * step).astype(np.float32)


def _infer(tshape=None, *, start, stop, shape):
    check_shape_input("linspace", shape, tshape)
    if len(shape) != 1 or int(shape[0]) < 0:
        raise ValueError(f"linspace: num must be one non-negative count; got {shape}")
    return TensorType((int(shape[0]),), "float32")


def _emit(em, types, p, inputs):
    ends = [em.const(np.array([v], np.float32)) for v in (p["start"], p["stop"])]
    num = inputs[0] if inputs else em.const(np.array(p["shape"], np.int32))
    return em.opr(LINSPACE, {"endpoint": True}, [*ends, num])


register(OpDef(
    "linspace", params={"start": 0.0, "stop": 1.0, "shape": (1,)}, shape_input=True,
    eager=lambda tshape=None, *, start, stop, shape: linspace32(start, stop, int(shape[0])),
    infer=_infer,
    lower=lambda L, tshape=None, *, start, stop, shape: L.const(
        linspace32(start, stop, int(shape[0])), "float32"),
    mge=MgeComposite(_emit),
    vjp=NOT_DIFFERENTIABLE,       # no tensor operand: the shape input is integer
))
