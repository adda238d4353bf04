"""Shape arithmetic that stays in the graph: `shape_of` and `make_shape`.

A trace records a shape computed from traced dimensions (`x.reshape(x.shape[0], -1)`) as
shape_of -> subtensor -> int32 elementwise -> make_shape, fed to reshape/broadcast_to as
their trailing shape input; the .mge writer writes it as MegEngine does (GetVarShape,
Subtensor, Elemwise, Concat), so the file runs at any batch size. Unlike `get_shape`,
`shape_of` is not folded into a constant when it is added: the expression is the point.
TVM never sees these nodes (Graph.without_shape_inputs drops them before lowering: the
compiled graph's shapes are static), but they lower anyway, for completeness.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from .registry import NOT_DIFFERENTIABLE, MgeComposite, OpDef, register
from .shape import CONCAT, GET_VAR_SHAPE


def _shape_of_lower(L, x):
    return L.const(np.array(L.types[0].shape, np.int32), "int32")


register(OpDef(
    "shape_of",
    eager=lambda x: np.array(x.shape, np.int32),
    infer=lambda x: TensorType((x.ndim,), "int32"),
    lower=_shape_of_lower,
    mge=MgeComposite(lambda em, types, p, inputs: em.opr(GET_VAR_SHAPE, {}, inputs[:1])),
    vjp=NOT_DIFFERENTIABLE,
))


def _make_shape_infer(*parts):
    for t in parts:
        if t.dtype != "int32" or t.ndim > 1:
            raise DTypeError(f"make_shape: parts must be int32 scalars or vectors; got {t}")
    return TensorType((sum(t.size for t in parts),), "int32")


def _make_shape_lower(L, *parts):
    R = L.R
    flat = [R.reshape(p, (t.size,)) for p, t in zip(parts, L.types)]
    return flat[0] if len(flat) == 1 else R.concat(flat, axis=0)


def _make_shape_emit(em, types, p, inputs):
    """One part is the shape itself (a 0-d value is (1,) in MegEngine); more are a Concat."""
    return inputs[0] if len(inputs) == 1 else em.opr(CONCAT, {"axis": 0}, inputs)


def _make_shape_eager(*parts):
    if not parts:
        raise ShapeError("make_shape: needs at least one part")
    return np.concatenate([np.reshape(p, -1) for p in parts]).astype(np.int32)


register(OpDef(
    "make_shape", eager=_make_shape_eager, infer=_make_shape_infer,
    lower=_make_shape_lower, mge=MgeComposite(_make_shape_emit),
    vjp=NOT_DIFFERENTIABLE,
))
