"""`indexing_incr_multi_axis_vec(x, v, *idx, slices, axes)`: x with v ADDED at the
elements `indexing_multi_axis_vec(x, *idx, slices, axes)` reads, repeated indices adding
up (MegEngine's IndexingIncrMultiAxisVec). It is the gradient of every gather: take,
indexing_multi_axis_vec, gather, pad's edge modes."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from .advanced_indexing import (_check, _const_or_input, _emit_items, _gather, _slice_key,
                                _unchanged, _vec_rows, _vector_key)
from .registry import MgeComposite, MgeOpr, OpDef, register

INDEXING_INCR = MgeOpr("IndexingIncrMultiAxisVec", "IndexDescMaskDump")
_NAME = "indexing_incr_multi_axis_vec"


def _incr_infer(x, v, *idx, slices, axes):
    _, shape = _check(_NAME, x, idx, slices, axes)
    if v.dtype != x.dtype:
        raise DTypeError(f"{_NAME}: value {v} must have the dtype of {x}")
    if v.shape != shape:
        raise ShapeError(f"{_NAME}: value {v} must have the indexed shape {shape}")
    return x


def _incr_eager(x, v, *idx, slices, axes):
    out = np.array(x)
    view = out[_slice_key(x.ndim, slices)]     # basic slicing: a view into `out`
    np.add.at(view, _vector_key(x.ndim, idx, axes), v)
    return out


def _incr_lower(L, x, v, *idx, slices, axes):
    R = L.R
    x_type, v_type = L.types[0], L.types[1]
    if v_type.size == 0:
        return _unchanged(L, x)
    grid = L.const(np.arange(x_type.size).reshape(x_type.shape), "int32")
    positions = _gather(L, grid, TensorType(x_type.shape, "int32"), idx, L.types[2:], slices,
                        axes)
    flat = L.normalize(R.reshape(x, [x_type.size]))
    pos = L.normalize(R.reshape(positions, [-1]))
    vals = L.normalize(R.reshape(v, [-1]))
    out = L.normalize(R.scatter_elements(flat, pos, vals, axis=0, reduction="add"))
    return R.reshape(out, list(x_type.shape))


def _incr_emit(em, types, p, inputs):
    items, extra = _emit_items(em, _vec_rows(p, inputs[2:]), _const_or_input(em))
    return em.opr(INDEXING_INCR, {"items": items}, [inputs[0], inputs[1], *extra])


def _incr_vjp(V, inputs, outputs, grads, *, slices, axes):
    """The added values are read back from the gradient; x passes it through."""
    x, v, idx = inputs[0], inputs[1], inputs[2:]
    g = grads[0]
    gv = V.apply("indexing_multi_axis_vec", g, *idx, slices=slices, axes=axes) \
        if V.needs_grad(1) else None
    return (g, gv) + (None,) * len(idx)


register(OpDef(_NAME, params={"slices": (), "axes": ()}, eager=_incr_eager,
               infer=_incr_infer, lower=_incr_lower, mge=MgeComposite(_incr_emit),
               opaque_in_optimize=True, vjp=_incr_vjp))
