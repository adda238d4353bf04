"""Ops that move or pick elements: transpose, take, where, topk, cumsum, argmax/argmin."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from ._rules import broadcast_shapes, lower_sorted, norm_axis, sort_order
from .reduce import AXIS_ADD_REMOVE
from .grad_tensor import transpose_vjp
from .registry import NOT_DIFFERENTIABLE, MgeChoice, MgeComposite, MgeOpr, OpDef, register
from .shape import TYPE_CVT

ELEMWISE = MgeOpr("Elemwise", "Elemwise")


# -- transpose (MegEngine's Dimshuffle) ---------------------------------------------------
def _transpose_infer(x, *, pattern):
    if sorted(pattern) != list(range(x.ndim)):
        raise ShapeError(f"transpose: pattern {pattern} is not a permutation of the axes of {x}")
    return TensorType(tuple(x.shape[i] for i in pattern), x.dtype)


register(OpDef(
    "transpose", params={"pattern": ()}, infer=_transpose_infer,
    eager=lambda x, *, pattern: np.array(np.transpose(x, pattern)),
    lower=lambda L, x, *, pattern: L.R.permute_dims(x, list(pattern)),
    mge=MgeOpr("Dimshuffle", "Dimshuffle",
               fields=lambda p: {"pattern": list(p["pattern"]), "ndim": len(p["pattern"])},
               decode=lambda f: {"pattern": tuple(f["pattern"])}),
    vjp=transpose_vjp,
))


# -- take: rows of `x` along `axis` picked by an int tensor (Embedding, x[idx]) ------------
def _take_infer(x, idx, *, axis):
    if idx.dtype not in ("int32", "int16", "int8", "uint8"):
        raise DTypeError(f"take: indices must be integers; got {idx}")
    ax = norm_axis("take", axis, x.ndim)
    return TensorType(x.shape[:ax] + idx.shape + x.shape[ax + 1:], x.dtype)


def _take_eager(x, idx, *, axis):
    ax = norm_axis("take", axis, x.ndim)
    if idx.size and (idx.min() < -x.shape[ax] or idx.max() >= x.shape[ax]):
        raise IndexError(f"take: index out of range for axis {ax} of size {x.shape[ax]}")
    return np.take(x, idx, axis=ax)


def _take_mge(types):
    x, idx = types
    return INDEXING if idx.ndim == 1 else None


INDEXING = MgeOpr("IndexingMultiAxisVec", "IndexDescMaskDump",
                  fields=lambda p: {"items": [{"axis": p["axis"], "begin": False, "end": False,
                                               "step": False, "idx": True}]})

def _take_vjp(V, inputs, outputs, grads, *, axis):
    """Rows read several times add their gradients (IndexingIncrMultiAxisVec)."""
    (x, idx), (g,) = inputs, grads
    ax = norm_axis("take", axis, x.ndim)
    return V.apply("indexing_incr_multi_axis_vec", V.zeros_like(x), g, idx, axes=(ax,)), None


register(OpDef("take", params={"axis": 0}, eager=_take_eager, infer=_take_infer,
               lower=lambda L, x, idx, *, axis: L.R.take(x, idx, axis=axis),
               mge=MgeChoice(_take_mge, ()), vjp=_take_vjp))


# -- where ----------------------------------------------------------------------------------
def _where_infer(mask, x, y):
    if mask.dtype != "bool":
        raise DTypeError(f"where: mask must be bool; got {mask}")
    if x.dtype != y.dtype:
        raise DTypeError(f"where: x and y dtypes differ; got {x} and {y}")
    return TensorType(broadcast_shapes("where", mask.shape, x.shape, y.shape), x.dtype)


def _where_emit(em, types, p, inputs):
    """MegEngine 1.13's Where subgraph: mask as 0/1 of x's dtype, then
    switch_gt0(m, x) + switch_gt0(1 - m, y). SWITCH_GT0 gives 0 where the mask is off
    (a product m * x would turn an unselected inf or NaN into NaN)."""
    mask, x, y = inputs
    dtype = types[1].dtype
    from .. import dtype as _dt
    m = em.opr(TYPE_CVT, {"type": _dt.info(dtype).mge_enum}, [mask])
    one = em.const(np.array([1], dtype))
    inv = em.opr(ELEMWISE, {"mode": "SUB"}, [one, m])
    a = em.opr(ELEMWISE, {"mode": "SWITCH_GT0"}, [m, x])
    b = em.opr(ELEMWISE, {"mode": "SWITCH_GT0"}, [inv, y])
    return em.opr(ELEMWISE, {"mode": "ADD"}, [a, b])


def _where_vjp(V, inputs, outputs, grads):
    """The gradient goes to the branch each element came from; none to the mask."""
    (mask, x, y), (g,) = inputs, grads
    zero = V.const(0, g)
    gx = V.sum_to(V.apply("where", mask, g, zero), tuple(x.shape)) if V.needs_grad(1) else None
    gy = V.sum_to(V.apply("where", mask, zero, g), tuple(y.shape)) if V.needs_grad(2) else None
    return None, gx, gy


register(OpDef("where", eager=lambda m, x, y: np.where(m, x, y), infer=_where_infer,
               lower=lambda L, m, x, y: L.R.where(m, x, y), mge=MgeComposite(_where_emit),
               vjp=_where_vjp))


# -- topk along the last axis -----------------------------------------------------------------
def _topk_infer(x, *, k, descending):
    if not 1 <= k <= x.shape[-1]:
        raise ShapeError(f"topk: k={k} is out of range for {x}")
    shape = x.shape[:-1] + (k,)
    return TensorType(shape, x.dtype), TensorType(shape, "int32")


def _topk_eager(x, *, k, descending):
    order = sort_order(x, descending)[..., :k]
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)


def _topk_lower(L, x, *, k, descending):
    return lower_sorted(L, x, k, descending)


def _topk_emit(em, types, p, inputs):
    """MegEngine's TopK takes the k smallest; a negative k asks for the largest."""
    if types[0].ndim != 2:
        raise NotImplementedError("topk: only 2-d inputs are written to .mge (MegEngine's TopK "
                                  "works on (batch, n))")
    k = em.const(np.array([-p["k"] if p["descending"] else p["k"]], np.int32))
    return em.opr_all(TOPK, {"mode": "VALUE_IDX_SORTED"}, [inputs[0], k])


TOPK = MgeOpr("TopK", "TopK", outputs=2, results=(0, 1))

def _topk_vjp(V, inputs, outputs, grads, *, k, descending):
    """The values' gradient goes back to the positions the indices name."""
    (x,), (_, indices), (g, _) = inputs, outputs, grads
    return (V.apply("scatter", V.zeros_like(x), indices, g, axis=x.ndim - 1),)


register(OpDef("topk", params={"k": 1, "descending": False}, eager=_topk_eager,
               infer=_topk_infer, lower=_topk_lower, mge=MgeComposite(_topk_emit),
               vjp=_topk_vjp))


# -- cumsum -----------------------------------------------------------------------------------
def _cumsum_infer(x, *, axis):
    norm_axis("cumsum", axis, x.ndim)
    return x


def _cumsum_vjp(V, inputs, outputs, grads, *, axis):
    """sum_{j >= i} g_j, the gradient of an inclusive cumsum: total - cumsum + g."""
    g = grads[0]
    total = V.apply("reduce", g, mode="sum", axis=axis, keepdims=True)
    return (total - V.apply("cumsum", g, axis=axis) + g,)


register(OpDef("cumsum", params={"axis": 0}, infer=_cumsum_infer,
               eager=lambda x, *, axis: np.cumsum(x, axis=axis, dtype=np.float64
                                                  if x.dtype.kind == "f" else None).astype(x.dtype),
               lower=lambda L, x, *, axis: L.R.cumsum(x, axis=axis),
               mge=MgeOpr("CumsumV1", "Cumsum",
                          fields=lambda p: {"axis": p["axis"], "exclusive": False,
                                            "reverse": False},
                          decode=lambda f: {"axis": f["axis"]}),
               vjp=_cumsum_vjp))


# -- argmax / argmin ------------------------------------------------------------------------------
def _arg_infer(x, *, mode, axis, keepdims):
    if mode not in ("max", "min"):
        raise ValueError(f"arg_reduce: mode must be 'max' or 'min'; got {mode!r}")
    ax = norm_axis(f"arg{mode}", axis, x.ndim)
    shape = tuple(1 if i == ax else d for i, d in enumerate(x.shape)) if keepdims else \
        x.shape[:ax] + x.shape[ax + 1:]
    return TensorType(shape, "int32")


def _arg_eager(x, *, mode, axis, keepdims):
    fn = np.argmax if mode == "max" else np.argmin
    return fn(x, axis=axis, keepdims=keepdims).astype(np.int32)


def _arg_lower(L, x, *, mode, axis, keepdims):
    R, t = L.R, L.types[0]
    fn = R.argmax if mode == "max" else R.argmin
    out = R.astype(fn(x, axis=axis, keepdims=keepdims), "int32")
    if t.dtype.startswith("float"):
        # MegEngine (and NumPy) point at the first NaN; TVM's argmax/argmin skip NaNs
        nan = R.astype(R.isnan(x), "int8")
        first_nan = R.astype(R.argmax(nan, axis=axis, keepdims=keepdims), "int32")
        has_nan = R.astype(R.max(nan, axis=axis, keepdims=keepdims), "bool")
        out = R.where(has_nan, first_nan, out)
    return out


def _arg_emit(em, types, p, inputs):
    ax = norm_axis("arg_reduce", p["axis"], types[0].ndim)
    spec = MgeOpr("Argmax" if p["mode"] == "max" else "Argmin", "Axis")
    out = em.opr(spec, {"axis": ax}, inputs)
    if not p["keepdims"]:
        out = em.opr(AXIS_ADD_REMOVE, {"desc": [{"method": "REMOVE", "axis": ax}]}, [out])
    return out


register(OpDef("arg_reduce", params={"mode": "max", "axis": 0, "keepdims": False},
               eager=_arg_eager, infer=_arg_infer, lower=_arg_lower,
               mge=MgeComposite(_arg_emit), vjp=NOT_DIFFERENTIABLE))
