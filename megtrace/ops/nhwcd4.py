"""MegEngine's NHWCD4 layout (optimize_for_inference's enable_hwcd4, its image layout):
activations are (N, H, C/4, W, 4), what MegEngine's ConvertFormatPass writes between
RelayoutFormat oprs (relay_bridge/nhwcd4.py).

relayout_format is MegEngine's RelayoutFormat with the two activation modes the pass puts
at the edges: NCHW_NHWCD4I (channels padded with zeros to a multiple of 4) and
NHWCD4I_NCHW. conv2d_nhwcd4 / conv_bias_nhwcd4 are Convolution / ConvBias with
format=NHWCD4; `sparse` and the weight's rank say which of MegEngine's filter layouts
(dnn relayout_format.cpp's INTER_WEIGHT_* modes) the weight has:
  dense    DENSE, weight (OC/4, FH, FW, round_up(IC, 4), 4)
  group    GROUP, weight (G, OCg/4, FH, FW, ICg, 4)
  channel  GROUP, weight (G/4, 1, FH, FW, 4)                (depthwise)
pool2d_nhwcd4 is Pooling with format=NHWCD4. Each computes as its NCHW op between
relayouts (eager and in Relax). Inference-only (written by optimize_for_inference),
hence NOT_DIFFERENTIABLE."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from . import nn
from .nchwxx import _NchwContext
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, register

MODES = ("NCHW_NHWCD4I", "NHWCD4I_NCHW")


# -- layouts (NumPy) -----------------------------------------------------------------------
def to_cd4(x: np.ndarray) -> np.ndarray:
    """NCHW -> (N, H, ceil(C/4), W, 4), the padded channels zero."""
    n, c, h, w = x.shape
    cb = (c + 3) // 4
    if c % 4:
        x = np.concatenate([x, np.zeros((n, cb * 4 - c, h, w), x.dtype)], axis=1)
    return np.ascontiguousarray(x.reshape(n, cb, 4, h, w).transpose(0, 3, 1, 4, 2))


def from_cd4(x: np.ndarray) -> np.ndarray:
    n, h, cb, w, p = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 4, 1, 3).reshape(n, cb * p, h, w))


def weight_kind(w_ndim: int, sparse: str) -> str:
    if w_ndim == 6:
        return "group"
    return "dense" if sparse == "DENSE" else "channel"


def weight_to_cd4(w: np.ndarray, kind: str) -> np.ndarray:
    """An NCHW weight (dense 4-d, grouped 5-d) in MegEngine's NHWCD4 filter layout."""
    if kind == "dense":
        oc, ic, fh, fw = w.shape
        icp = (ic + 3) // 4 * 4
        if icp != ic:
            w = np.concatenate([w, np.zeros((oc, icp - ic, fh, fw), w.dtype)], axis=1)
        return np.ascontiguousarray(w.reshape(oc // 4, 4, icp, fh, fw).transpose(0, 3, 4, 2, 1))
    if kind == "group":
        g, ocg, icg, fh, fw = w.shape
        return np.ascontiguousarray(
            w.reshape(g, ocg // 4, 4, icg, fh, fw).transpose(0, 1, 4, 5, 3, 2))
    g, _, _, fh, fw = w.shape
    return np.ascontiguousarray(w.reshape(g // 4, 4, 1, fh, fw).transpose(0, 2, 3, 4, 1))


# (axes from the NHWCD4 filter to the split NCHW one, the NCHW shape)
def _weight_back(kind: str, s: tuple) -> tuple[tuple, tuple]:
    if kind == "dense":                      # (OCB, FH, FW, ICp, 4) -> (OCB, 4, ICp, FH, FW)
        return (0, 4, 3, 1, 2), (s[0] * 4, s[3], s[1], s[2])
    if kind == "group":                      # (G, OCB, FH, FW, ICg, 4) -> (G, OCB, 4, ICg, FH, FW)
        return (0, 1, 5, 4, 2, 3), (s[0], s[1] * 4, s[4], s[2], s[3])
    return (0, 4, 1, 2, 3), (s[0] * 4, 1, 1, s[2], s[3])   # (GB, 1, FH, FW, 4)


def weight_from_cd4(w: np.ndarray, kind: str) -> np.ndarray:
    axes, shape = _weight_back(kind, w.shape)
    return np.ascontiguousarray(w.transpose(axes).reshape(shape))


def _check_weight(kind: str, w: TensorType) -> None:
    ok = {"dense": w.ndim == 5 and w.shape[4] == 4 and w.shape[3] % 4 == 0,
          "group": w.ndim == 6 and w.shape[5] == 4,
          "channel": w.ndim == 5 and w.shape[1] == 1 and w.shape[4] == 4}[kind]
    if not ok:
        raise ShapeError(f"conv_nhwcd4: weight {w} is not MegEngine's NHWCD4 {kind} filter "
                         "layout")


def _cd4_type(t: TensorType) -> TensorType:
    n, c, h, w = t.shape
    return TensorType((n, h, (c + 3) // 4, w, 4), t.dtype)


def _nchw_type(t: TensorType) -> TensorType:
    if t.ndim != 5 or t.shape[4] != 4:
        raise ShapeError(f"nhwcd4: input must be (N, H, C/4, W, 4); got {t}")
    n, h, cb, w, _ = t.shape
    return TensorType((n, cb * 4, h, w), t.dtype)


# -- relayout_format -----------------------------------------------------------------------
def _relayout_infer(x, *, mode):
    if mode not in MODES:
        raise ValueError(f"relayout_format: mode must be one of {MODES}; got {mode!r}")
    if mode == "NCHW_NHWCD4I":
        if x.ndim != 4:
            raise ShapeError(f"relayout_format NCHW_NHWCD4I: input must be NCHW; got {x}")
        return _cd4_type(x)
    return _nchw_type(x)


def _relayout_eager(x, *, mode):
    return to_cd4(x) if mode == "NCHW_NHWCD4I" else from_cd4(x)


def _r_to_cd4(R, x, t: TensorType):
    n, c, h, w = t.shape
    cb = (c + 3) // 4
    if c % 4:
        x = R.nn.pad(x, [0, 0, 0, cb * 4 - c, 0, 0, 0, 0])
    return R.permute_dims(R.reshape(x, (n, cb, 4, h, w)), [0, 3, 1, 4, 2])


def _r_from_cd4(R, x, t: TensorType):
    n, h, cb, w, p = t.shape
    return R.reshape(R.permute_dims(x, [0, 2, 4, 1, 3]), (n, cb * p, h, w))


def _relayout_lower(L, x, *, mode):
    t = L.types[0]
    return _r_to_cd4(L.R, x, t) if mode == "NCHW_NHWCD4I" else _r_from_cd4(L.R, x, t)


register(OpDef("relayout_format", eager=_relayout_eager, infer=_relayout_infer,
               lower=_relayout_lower, params={"mode": "NCHW_NHWCD4I"},
               mge=MgeOpr("RelayoutFormatV1", "RelayoutFormat",
                          fields=lambda p: {"mode": p["mode"]},
                          decode=lambda f: {"mode": f["mode"]}),
               vjp=NOT_DIFFERENTIABLE))


# -- convolution ---------------------------------------------------------------------------
def _nchw_types(x: TensorType, w: TensorType, sparse: str):
    kind = weight_kind(w.ndim, sparse)
    _check_weight(kind, w)
    _, shape = _weight_back(kind, w.shape)
    return kind, _nchw_type(x), TensorType(shape, w.dtype)


def _conv_infer(x, w, *, sparse, **conv):
    _, x4, w4 = _nchw_types(x, w, sparse)
    return _cd4_type(nn._conv2d_infer(x4, w4, **conv))


def _bias_nchw(b: TensorType) -> TensorType:
    return _nchw_type(b) if b.ndim == 5 else b


def _conv_bias_infer(x, w, b, *, sparse, nonline, **conv):
    _, x4, w4 = _nchw_types(x, w, sparse)
    return _cd4_type(nn._conv_bias_infer(x4, w4, _bias_nchw(b), nonline=nonline, **conv))


def _conv_eager(x, w, *, sparse, **conv):
    kind = weight_kind(w.ndim, sparse)
    return to_cd4(nn._conv2d_eager(from_cd4(x), weight_from_cd4(w, kind), **conv))


def _conv_bias_eager(x, w, b, *, sparse, **conv):
    kind = weight_kind(w.ndim, sparse)
    b4 = from_cd4(b) if b.ndim == 5 else b
    return to_cd4(nn._conv_bias_eager(from_cd4(x), weight_from_cd4(w, kind), b4, **conv))


def _conv_lower_args(L, x, w, sparse):
    R = L.R
    xt, wt = L.types[0], L.types[1]
    kind, x4t, w4t = _nchw_types(xt, wt, sparse)
    axes, _ = _weight_back(kind, wt.shape)
    w4 = R.reshape(R.permute_dims(w, list(axes)), w4t.shape)
    return _r_from_cd4(R, x, xt), w4, x4t, w4t


def _conv_lower(L, x, w, *, sparse, **conv):
    x4, w4, x4t, w4t = _conv_lower_args(L, x, w, sparse)
    y = nn._conv2d_lower(_NchwContext(L, [x4t, w4t]), x4, w4, **conv)
    return _r_to_cd4(L.R, y, _nchw_type(L.out))


def _conv_bias_lower(L, x, w, b, *, sparse, **conv):
    x4, w4, x4t, w4t = _conv_lower_args(L, x, w, sparse)
    bt = L.types[2]
    b4 = _r_from_cd4(L.R, b, bt) if bt.ndim == 5 else b
    y = nn._conv_bias_lower(_NchwContext(L, [x4t, w4t, _bias_nchw(bt)]), x4, w4, b4, **conv)
    return _r_to_cd4(L.R, y, _nchw_type(L.out))


# Image2DPack4 align axis of each filter layout (dnn relayout_format.cpp)
ALIGN_AXIS = {"dense": 3, "group": 4, "channel": 1, "activation": 2}


def _conv_emit(opr_type: str, param: str, fields):
    def emit(em, types, p, inputs):
        kind = weight_kind(types[1].ndim, p["sparse"])
        spec = MgeOpr(opr_type, param, match={"sparse": p["sparse"], "format": "NHWCD4"},
                      fields=fields, extra=(("ExecutionPolicy", {}),))
        em.image_format(inputs[1], ALIGN_AXIS[kind])
        if len(inputs) > 2 and types[2].ndim == 5:
            em.image_format(inputs[2], ALIGN_AXIS["activation"])
        return em.opr(spec, spec.fields_for(p), inputs)
    return MgeComposite(emit)


_CONV_PARAMS = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                "compute_mode": "DEFAULT", "sparse": "DENSE"}

register(OpDef("conv2d_nhwcd4", eager=_conv_eager, infer=_conv_infer, lower=_conv_lower,
               params=dict(_CONV_PARAMS),
               mge=_conv_emit("Convolution", "Convolution", nn._conv2d_fields),
               vjp=NOT_DIFFERENTIABLE))
register(OpDef("conv_bias_nhwcd4", eager=_conv_bias_eager, infer=_conv_bias_infer,
               lower=_conv_bias_lower, params={**_CONV_PARAMS, "nonline": "IDENTITY"},
               mge=_conv_emit("ConvBiasForward", "ConvBias",
                              lambda p: {**nn._conv2d_fields(p), "nonlineMode": p["nonline"]}),
               vjp=NOT_DIFFERENTIABLE))


# -- pooling -------------------------------------------------------------------------------
def _pool_infer(x, **pool):
    return _cd4_type(nn._pool_infer(_nchw_type(x), **pool))


def _pool_eager(x, **pool):
    return to_cd4(nn._pool_eager(from_cd4(x), **pool))


def _pool_lower(L, x, **pool):
    xt = L.types[0]
    y = nn._pool_lower(L, _r_from_cd4(L.R, x, xt), **pool)
    return _r_to_cd4(L.R, y, _nchw_type(L.out))


def _pool_emit(em, types, p, inputs):
    base = nn.POOLING
    spec = MgeOpr(base.type, base.param, match={"format": "NHWCD4"}, fields=base.fields)
    return em.opr(spec, spec.fields_for(p), inputs)


register(OpDef("pool2d_nhwcd4", eager=_pool_eager, infer=_pool_infer, lower=_pool_lower,
               params={"mode": "max", "kernel": (2, 2), "stride": (2, 2), "padding": (0, 0)},
               mge=MgeComposite(_pool_emit), vjp=NOT_DIFFERENTIABLE))
