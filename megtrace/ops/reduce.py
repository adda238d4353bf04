"""Reductions (MegEngine's Reduce) and axis insertion/removal (AxisAddRemove).

MegEngine's Reduce keeps the reduced axis (size 1); `keepdims=False` is Reduce followed
by AxisAddRemove REMOVE, and that is how it is written to a .mge.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from ._rules import norm_axis
from .grad_tensor import reduce_vjp, reshape_vjp
from .registry import MgeComposite, MgeOpr, OpDef, register

_MODES = {  # name: (numpy, relax op name, MegEngine ReduceMode)
    "sum": (np.sum, "sum", "SUM"),
    "mean": (np.mean, "mean", "MEAN"),
    "max": (np.max, "max", "MAX_"),
    "min": (np.min, "min", "MIN_"),
    "prod": (np.prod, "prod", "PRODUCT"),
}
REDUCE = MgeOpr("ReduceV2", "Reduce")
AXIS_ADD_REMOVE = MgeOpr("AxisAddRemove", "AxisAddRemove")
INT_MAX = 2147483647
# Reduce's data_type (MegEngine's ReduceDataType): DEFAULT computes in the input dtype,
# FLOAT_O16xC32 takes and gives float16 but sums in float32 (what enable_io16xc32 sets).
DATA_TYPES = {"DEFAULT": 0, "FLOAT_O16xC32": 3}


def _axes(op: str, t: TensorType, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(t.ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = tuple(sorted({norm_axis(op, a, t.ndim) for a in axes}))
    return out


def _reduce_infer(x, *, mode, axis, keepdims, data_type="DEFAULT"):
    if mode not in _MODES:
        raise ValueError(f"reduce: mode must be one of {sorted(_MODES)}; got {mode!r}")
    if data_type not in DATA_TYPES or (data_type == "FLOAT_O16xC32" and x.dtype != "float16"):
        raise ValueError(f"reduce: data_type must be one of {sorted(DATA_TYPES)} "
                         f"(FLOAT_O16xC32 for float16 input only); got {data_type!r} for {x}")
    axes = _axes("reduce", x, axis)
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return TensorType(shape, x.dtype)


def _reduce_eager(x, *, mode, axis, keepdims, data_type="DEFAULT"):
    axes = _axes("reduce", TensorType.of(x), axis)
    out = _MODES[mode][0](x.astype(np.float64) if x.dtype.kind == "f" else x, axis=axes,
                          keepdims=keepdims)
    return np.asarray(out).astype(x.dtype)


def _reduce_lower(L, x, *, mode, axis, keepdims, data_type="DEFAULT"):
    R, t = L.R, L.types[0]
    axes = list(_axes("reduce", t, axis))
    if data_type == "FLOAT_O16xC32":
        sums = getattr(R, _MODES[mode][1])(R.astype(x, "float32"), axis=axes, keepdims=keepdims)
        return R.astype(sums, "float16")
    out = getattr(R, _MODES[mode][1])(x, axis=axes, keepdims=keepdims)
    if mode in ("max", "min") and t.dtype.startswith("float"):
        # MegEngine (and NumPy) give NaN where the reduced values hold one; TVM's max/min
        # skip NaNs
        has_nan = R.max(R.astype(R.isnan(x), "int8"), axis=axes, keepdims=keepdims)
        out = R.where(R.astype(has_nan, "bool"), L.const(np.nan, t.dtype), out)
    return out


def _reduce_emit(em, types, p, inputs):
    """One ReduceV2 per axis (each keeps its axis), then AxisAddRemove unless keepdims."""
    axes = _axes("reduce", types[0], p["axis"])
    out = inputs[0]
    for a in axes:
        out = em.opr(REDUCE, {"mode": _MODES[p["mode"]][2], "axis": a,
                              "data_type": DATA_TYPES[p.get("data_type", "DEFAULT")]}, [out])
    if not p["keepdims"] and axes:
        desc = [{"method": "REMOVE", "axis": a} for a in sorted(axes, reverse=True)]
        out = em.opr(AXIS_ADD_REMOVE, {"desc": desc}, [out])
    return out


register(OpDef("reduce", eager=_reduce_eager, infer=_reduce_infer, lower=_reduce_lower,
               params={"mode": "sum", "axis": None, "keepdims": False, "data_type": "DEFAULT"},
               mge=MgeComposite(_reduce_emit), vjp=reduce_vjp))

MODE_BY_MGE = {v[2]: k for k, v in _MODES.items()}


# -- expand_dims / squeeze ------------------------------------------------------------
def _expand_infer(x, *, axis):
    ndim = x.ndim + len(axis)
    axes = sorted(norm_axis("expand_dims", a, ndim) for a in axis)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return TensorType(tuple(shape), x.dtype)


def _squeeze_infer(x, *, axis):
    axes = {norm_axis("squeeze", a, x.ndim) for a in axis}
    for a in axes:
        if x.shape[a] != 1:
            raise ShapeError(f"squeeze: axis {a} of {x} has size {x.shape[a]}, not 1")
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _axis_emit(method):
    def emit(em, types, p, inputs):
        t = types[0]
        ndim = t.ndim + len(p["axis"]) if method == "ADD_1" else t.ndim
        axes = sorted(norm_axis("axis", a, ndim) for a in p["axis"])
        if method == "REMOVE":
            axes = axes[::-1]      # remove from the back so earlier axes keep their index
        desc = [{"method": method, "axis": a} for a in axes]
        return em.opr(AXIS_ADD_REMOVE, {"desc": desc}, inputs)
    return MgeComposite(emit)


register(OpDef("expand_dims", params={"axis": ()}, infer=_expand_infer,
               eager=lambda x, *, axis: x.reshape(_expand_infer(TensorType.of(x), axis=axis).shape),
               lower=lambda L, x, *, axis: L.R.reshape(x, L.out.shape),
               mge=_axis_emit("ADD_1"), vjp=reshape_vjp))
register(OpDef("squeeze", params={"axis": ()}, infer=_squeeze_infer,
               eager=lambda x, *, axis: x.reshape(_squeeze_infer(TensorType.of(x), axis=axis).shape),
               lower=lambda L, x, *, axis: L.R.reshape(x, L.out.shape),
               mge=_axis_emit("REMOVE"), vjp=reshape_vjp))
