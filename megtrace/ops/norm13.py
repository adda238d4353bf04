"""MegEngine 1.13's GeneralNorm and LRN oprs (F.nn.general_norm, F.nn.local_response_norm).

general_norm normalizes one run of axes [axis_start, axis_end) with an affine weight/bias
of those axes' shape (written as MegEngine's GeneralNorm opr, 3 outputs like LayerNorm).
local_response_norm divides each NCHW value by (k + alpha * sum of squares over the
channel window c - n//2 .. c + n//2, clipped)^beta (MegEngine's LRN opr).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from .grad_norm import general_norm_vjp, lrn_vjp
from .registry import MgeComposite, MgeOpr, OpDef, get, register


# -- general_norm ------------------------------------------------------------------------
def _gn_axes(name: str, x, axis_start: int, axis_end: int) -> tuple[int, ...]:
    if not 0 <= axis_start < axis_end <= x.ndim:
        raise ShapeError(f"{name}: cannot normalize axes [{axis_start}, {axis_end}) of {x}")
    return tuple(range(axis_start, axis_end))


def _gn_infer(x, weight, bias, *, eps, axis_start, axis_end):
    axes = _gn_axes("general_norm", x, axis_start, axis_end)
    shape = tuple(x.shape[a] for a in axes)
    for name, t in (("weight", weight), ("bias", bias)):
        if tuple(t.shape) != shape:
            raise ShapeError(f"general_norm: {name} must have shape {shape}; got {t}")
    return x


def _param_view(t, ndim: int, axis_start: int):
    """weight/bias of the normalized axes' shape, broadcastable against the input."""
    return t.reshape((1,) * axis_start + tuple(t.shape) + (1,) * (ndim - axis_start - t.ndim))


def _gn_eager(x, weight, bias, *, eps, axis_start, axis_end):
    axes = tuple(range(axis_start, axis_end))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps)
    return (y * _param_view(weight, x.ndim, axis_start) +
            _param_view(bias, x.ndim, axis_start)).astype(x.dtype)


def _gn_lower(L, x, weight, bias, *, eps, axis_start, axis_end):
    return L.R.nn.layer_norm(x, weight, bias, axes=list(range(axis_start, axis_end)),
                             epsilon=eps)


GENERAL_NORM = MgeOpr("GeneralNorm", "GeneralNorm", outputs=3, result=0,
                      decode=lambda f: {"eps": f["eps"], "axis_start": f["axis_start"],
                                        "axis_end": f["axis_end"]})


def _gn_emit(em, types, p, inputs):
    return em.opr(GENERAL_NORM, {"affine": True, "eps": p["eps"], "axis_start": p["axis_start"],
                                 "axis_end": p["axis_end"]}, inputs)


def _gn_read(g, opr, ins, _):
    """MegEngine writes 1 input when affine is False: weight ones, bias zeros."""
    f = opr.params[0][1] if opr.params else {}
    x, start, end = ins[0], int(f.get("axis_start", 0)), int(f.get("axis_end", 0))
    if len(ins) == 1 or not f.get("affine", True):
        shape = x.type.shape[start:end]
        ins = [x, g.add_const(np.ones(shape, x.type.dtype)),
               g.add_const(np.zeros(shape, x.type.dtype))]
    (y,) = g.add_node(get("general_norm"), ins[:3], {"eps": float(f.get("eps", 1e-5)),
                                                     "axis_start": start, "axis_end": end})
    return [y, None, None]        # mean and rstd are not modelled


register(OpDef("general_norm", params={"eps": 1e-5, "axis_start": 0, "axis_end": 1},
               eager=_gn_eager, infer=_gn_infer, lower=_gn_lower, mge=MgeComposite(_gn_emit),
               mge_read={"GeneralNorm": _gn_read}, vjp=general_norm_vjp))


# -- local response normalization ---------------------------------------------------------
def _lrn_infer(x, *, n, k, alpha, beta):
    if x.ndim != 4:
        raise ShapeError(f"lrn (local_response_norm): expects a 4-d NCHW input; got {x}")
    if n % 2 != 1:
        raise ShapeError(f"lrn (local_response_norm): kernel_size n must be odd; got {n}")
    return x


def _lrn_eager(x, *, n, k, alpha, beta):
    x64 = x.astype(np.float64)
    sq = x64 * x64
    c, half = x.shape[1], n // 2
    acc = np.zeros_like(sq)
    for dc in range(c):
        acc[:, dc] = sq[:, max(dc - half, 0):min(dc + half, c - 1) + 1].sum(axis=1)
    return (x64 * (k + alpha * acc) ** -beta).astype(x.dtype)


def _lrn_lower(L, x, *, n, k, alpha, beta):
    """The channel window sum as a 1x1 convolution with a band of ones."""
    c, dtype = L.types[0].shape[1], L.types[0].dtype
    idx = np.arange(c)
    band = (np.abs(idx[:, None] - idx[None, :]) <= n // 2).astype(dtype)[:, :, None, None]
    sq = L.R.multiply(x, x)
    acc = L.R.nn.conv2d(sq, L.const(band, dtype))
    denom = L.R.power(L.R.add(L.R.multiply(acc, L.const(alpha, dtype)), L.const(k, dtype)),
                      L.const(-beta, dtype))
    return L.R.multiply(x, denom)


LRN = MgeOpr("LRN", "LRN", fields=lambda p: {"n": p["n"], "k": p["k"], "alpha": p["alpha"],
                                             "beta": p["beta"]},
             decode=lambda f: {"n": f["n"], "k": f["k"], "alpha": f["alpha"], "beta": f["beta"]})

register(OpDef("lrn", params={"n": 5, "k": 2.0, "alpha": 1e-4, "beta": 0.75}, eager=_lrn_eager,
               infer=_lrn_infer, lower=_lrn_lower, mge=LRN, vjp=lrn_vjp))
