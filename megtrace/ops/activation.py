"""Activations with parameters or axes: softmax, leaky_relu, clip, layer_norm."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ._rules import norm_axis
from .grad_tensor import clip_vjp, leaky_relu_vjp, softmax_vjp
from .grad_norm import layer_norm_vjp
from .registry import MgeComposite, MgeOpr, OpDef, register

ELEMWISE = MgeOpr("Elemwise", "Elemwise")


# -- softmax ----------------------------------------------------------------------------
def _softmax_eager(x, *, axis):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def _softmax_infer(x, *, axis):
    norm_axis("softmax", axis, x.ndim)
    return x


register(OpDef("softmax", eager=_softmax_eager, infer=_softmax_infer, params={"axis": -1},
               lower=lambda L, x, *, axis: L.R.nn.softmax(x, axis=axis),
               mge=MgeOpr("Softmax", "Softmax", fields=lambda p: {"axis": p["axis"]},
                          decode=lambda f: {"axis": f["axis"]}), vjp=softmax_vjp))


# -- leaky_relu (MegEngine: Elemwise PRELU with a scalar slope) -------------------------
def _leaky_emit(em, types, p, inputs):
    slope = em.const(np.array([p["negative_slope"]], types[0].dtype))
    return em.opr(ELEMWISE, {"mode": "PRELU"}, [inputs[0], slope])


register(OpDef(
    "leaky_relu", params={"negative_slope": 0.01}, infer=lambda x, **_: x,
    eager=lambda x, *, negative_slope: np.where(x > 0, x, x * negative_slope).astype(x.dtype),
    lower=lambda L, x, *, negative_slope: L.R.nn.leakyrelu(x, alpha=negative_slope),
    mge=MgeComposite(_leaky_emit),
    vjp=leaky_relu_vjp,
))


# -- clip: Elemwise CLIP with both bounds (fbs/compat.py writes it as MAX then MIN unless
# no_change_graph, as MegEngine does), else MAX or MIN -----------------------------------
def _clip_eager(x, *, lower, upper):
    # one pass over x with both bounds (np.clip is min(max(x, lower), upper), so lower > upper
    # gives upper and NaN stays NaN, as with two passes)
    lo = None if lower is None else np.asarray(lower, x.dtype)
    hi = None if upper is None else np.asarray(upper, x.dtype)
    if lo is not None and hi is not None:
        return np.clip(x, lo, hi)
    if lo is None and hi is None:
        return x.copy()
    return np.maximum(x, lo) if lo is not None else np.minimum(x, hi)


def _clip_lower(L, x, *, lower, upper):
    lo = float(lower) if lower is not None else float("-inf")
    hi = float(upper) if upper is not None else float("inf")
    return L.R.clip(x, lo, hi)


def _clip_emit(em, types, p, inputs):
    out = inputs[0]
    dtype = types[0].dtype
    if p["lower"] is not None and p["upper"] is not None:
        bounds = [em.const(np.array([p[k]], dtype)) for k in ("lower", "upper")]
        return em.opr(ELEMWISE, {"mode": "CLIP"}, [out, *bounds])
    if p["lower"] is not None:
        out = em.opr(ELEMWISE, {"mode": "MAX_"}, [out, em.const(np.array([p["lower"]], dtype))])
    if p["upper"] is not None:
        out = em.opr(ELEMWISE, {"mode": "MIN_"}, [out, em.const(np.array([p["upper"]], dtype))])
    return out


def _clip_infer(x, *, lower, upper):
    if lower is not None and upper is not None and lower > upper:
        raise ValueError(f"clip: lower {lower} is greater than upper {upper}")
    return x


register(OpDef("clip", params={"lower": None, "upper": None}, eager=_clip_eager,
               infer=_clip_infer, lower=_clip_lower, mge=MgeComposite(_clip_emit), vjp=clip_vjp))


# -- layer_norm over the last `normalized_dim` axes ---------------------------------------
def _ln_infer(x, weight, bias, *, eps, normalized_dim):
    if not 1 <= normalized_dim <= x.ndim:
        raise ShapeError(f"layer_norm: cannot normalize the last {normalized_dim} axes of {x}")
    shape = x.shape[x.ndim - normalized_dim:]
    for name, t in (("weight", weight), ("bias", bias)):
        if t.shape != shape:
            raise ShapeError(f"layer_norm: {name} must have shape {shape}; got {t}")
    return x


def _ln_eager(x, weight, bias, *, eps, normalized_dim):
    axes = tuple(range(x.ndim - normalized_dim, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    return ((x64 - mean) / np.sqrt(var + eps) * weight + bias).astype(x.dtype)


def _ln_lower(L, x, weight, bias, *, eps, normalized_dim):
    nd = L.types[0].ndim
    return L.R.nn.layer_norm(x, weight, bias, axes=list(range(nd - normalized_dim, nd)),
                             epsilon=eps)


def _ln_fields(p):
    return {"affine": True, "eps": p["eps"], "normalized_dim": p["normalized_dim"]}


def _ln_emit(em, types, p, inputs):
    x = types[0]
    size = int(np.prod(x.shape[x.ndim - p["normalized_dim"]:]))
    return em.opr(LAYER_NORM, {**_ln_fields(p), "normalized_size": size}, inputs)


LAYER_NORM = MgeOpr("LayerNorm", "LayerNorm", outputs=3, result=0,
                    decode=lambda f: {"eps": f["eps"], "normalized_dim": f["normalized_dim"]})

register(OpDef("layer_norm", params={"eps": 1e-5, "normalized_dim": 1}, eager=_ln_eager,
               infer=_ln_infer, lower=_ln_lower, mge=MgeComposite(_ln_emit),
               vjp=layer_norm_vjp))
