"""MegEngine's channel-blocked layouts NCHW88 (x86 AVX) and NCHW44 (ARM): activations are
(N, C/p, H, W, p) with p = 8 or 4, what optimize_for_inference's enable_nchw88 /
enable_nchw44 write (relay_bridge/nchwxx.py).

conv2d_nchwxx / conv_bias_nchwxx are Convolution / ConvBias with format=NCHW88|NCHW44;
their weight's rank and the input's say which of MegEngine's four cases it is:
  hybrid   NCHW input,  weight (OC/p, FH, FW, IC, p)               (the first conv, IC < p)
  dense    blocked input, weight (OC/p, IC/p, FH, FW, p_ic, p_oc)
  channel  blocked input, weight (G/p, 1, 1, FH, FW, p)             (depthwise, sparse=GROUP)
  group    blocked input, weight (G, OCg/p, ICg/p, FH, FW, p_ic, p_oc)
pool2d_nchwxx is Pooling with format=NCHW88|NCHW44. Each computes as its NCHW op between
relayouts (eager and in Relax); the point of the layout is the file Lite runs. They are
inference-only (only optimize_for_inference writes them, after training), hence declared
NOT_DIFFERENTIABLE."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from . import image, nn, warp
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, register

FORMATS = {8: "NCHW88", 4: "NCHW44"}
PACK = {v: k for k, v in FORMATS.items()}
KINDS = ("hybrid", "dense", "channel", "group")


# -- layouts (NumPy) -----------------------------------------------------------------------
def to_blocked(x: np.ndarray, p: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // p, p, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    n, cb, h, w, p = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * p, h, w))


_WEIGHT_AXES = {"hybrid": (0, 3, 4, 2, 1), "dense": (0, 2, 4, 5, 3, 1),
                "channel": (0, 2, 3, 4, 5, 1), "group": (0, 1, 3, 5, 6, 4, 2)}


def _weight_split(kind: str, shape: tuple, p: int) -> tuple:
    """The NCHW weight's shape with each blocked axis split as (outer, p)."""
    if kind == "hybrid":
        oc, ic, fh, fw = shape
        return (oc // p, p, ic, fh, fw)
    if kind == "dense":
        oc, ic, fh, fw = shape
        return (oc // p, p, ic // p, p, fh, fw)
    if kind == "channel":
        g, _, _, fh, fw = shape
        return (g // p, p, 1, 1, fh, fw)
    g, ocg, icg, fh, fw = shape
    return (g, ocg // p, p, icg // p, p, fh, fw)


def weight_to_blocked(w: np.ndarray, kind: str, p: int) -> np.ndarray:
    """An NCHW weight (dense 4-d, grouped 5-d) in MegEngine's blocked filter layout."""
    split = w.reshape(_weight_split(kind, w.shape, p))
    return np.ascontiguousarray(split.transpose(_WEIGHT_AXES[kind]))


def _inverse(axes):
    return tuple(int(i) for i in np.argsort(axes))


def _nchw_weight_shape(kind: str, w: TensorType, p: int) -> tuple:
    s = w.shape
    if kind == "hybrid":
        return (s[0] * p, s[3], s[1], s[2])
    if kind == "dense":
        return (s[0] * p, s[1] * p, s[2], s[3])
    if kind == "channel":
        return (s[0] * p, 1, 1, s[3], s[4])
    return (s[0], s[1] * p, s[2] * p, s[3], s[4])


def weight_from_blocked(w: np.ndarray, kind: str, p: int) -> np.ndarray:
    shape = _nchw_weight_shape(kind, TensorType.of(w), p)
    return np.ascontiguousarray(w.transpose(_inverse(_WEIGHT_AXES[kind])).reshape(shape))


# -- the conv cases ------------------------------------------------------------------------
def conv_kind(x: TensorType, w: TensorType) -> tuple[str, int]:
    """(case, p) of a blocked convolution, from its input and weight types."""
    p = w.shape[-1] if w.ndim else 0
    if x.ndim == 4 and w.ndim == 5 and p in FORMATS:
        return "hybrid", p
    if x.ndim == 5 and x.shape[4] in FORMATS:
        p = x.shape[4]
        if w.ndim == 7 and w.shape[-2:] == (p, p):
            return "group", p
        if w.ndim == 6 and w.shape[1:3] == (1, 1) and w.shape[0] == x.shape[1] and \
                w.shape[5] == p and w.shape[4] != p:
            return "channel", p
        if w.ndim == 6 and w.shape[-2:] == (p, p):
            return "dense", p
    raise ShapeError(f"conv_nchwxx: input {x} and weight {w} are none of MegEngine's "
                     "NCHW88/NCHW44 convolution layouts")


def _nchw_types(x: TensorType, w: TensorType):
    kind, p = conv_kind(x, w)
    x4 = x if x.ndim == 4 else TensorType((x.shape[0], x.shape[1] * p) + x.shape[2:4], x.dtype)
    return kind, p, x4, TensorType(_nchw_weight_shape(kind, w, p), w.dtype)


def _blocked_type(t: TensorType, p: int) -> TensorType:
    n, c, h, w = t.shape
    if c % p:
        raise ShapeError(f"nchwxx: {c} channels are not a multiple of {p}")
    return TensorType((n, c // p, h, w, p), t.dtype)


def _bias_nchw(b: TensorType) -> TensorType:
    return TensorType((1, b.shape[1] * b.shape[4], 1, 1), b.dtype) if b.ndim == 5 else b


def _conv_infer(x, w, **conv):
    kind, p, x4, w4 = _nchw_types(x, w)
    return _blocked_type(nn._conv2d_infer(x4, w4, **conv), p)


def _conv_bias_infer(x, w, b, *, nonline, **conv):
    kind, p, x4, w4 = _nchw_types(x, w)
    return _blocked_type(nn._conv_bias_infer(x4, w4, _bias_nchw(b), nonline=nonline, **conv), p)


def _eager_inputs(x, w):
    kind, p = conv_kind(TensorType.of(x), TensorType.of(w))
    x4 = x if x.ndim == 4 else from_blocked(x)
    return p, x4, weight_from_blocked(w, kind, p)


def _conv_eager(x, w, **conv):
    p, x4, w4 = _eager_inputs(x, w)
    return to_blocked(nn._conv2d_eager(x4, w4, **conv), p)


def _conv_bias_eager(x, w, b, **conv):
    p, x4, w4 = _eager_inputs(x, w)
    b4 = from_blocked(b) if b.ndim == 5 else b
    return to_blocked(nn._conv_bias_eager(x4, w4, b4, **conv), p)


# -- Relax: the same relayouts around the NCHW lowering ------------------------------------
def _r_from_blocked(R, x, t: TensorType):
    n, cb, h, w, p = t.shape
    return R.reshape(R.permute_dims(x, [0, 1, 4, 2, 3]), (n, cb * p, h, w))


def _r_to_blocked(R, y, t: TensorType):
    n, cb, h, w, p = t.shape
    return R.permute_dims(R.reshape(y, (n, cb, p, h, w)), [0, 1, 3, 4, 2])


class _NchwContext:
    """The lowering context as an NCHW op's lowering sees it (types of its NCHW inputs)."""

    def __init__(self, L, types):
        self.R, self.types, self._L = L.R, types, L

    def __getattr__(self, name):
        return getattr(self._L, name)


def _conv_lower_args(L, x, w):
    R = L.R
    xt, wt = L.types[0], L.types[1]
    kind, p, x4t, w4t = _nchw_types(xt, wt)
    x4 = x if xt.ndim == 4 else _r_from_blocked(R, x, xt)
    w4 = R.reshape(R.permute_dims(w, list(_inverse(_WEIGHT_AXES[kind]))), w4t.shape)
    return x4, w4, x4t, w4t


def _conv_lower(L, x, w, **conv):
    x4, w4, x4t, w4t = _conv_lower_args(L, x, w)
    y = nn._conv2d_lower(_NchwContext(L, [x4t, w4t]), x4, w4, **conv)
    return _r_to_blocked(L.R, y, L.out)


def _conv_bias_lower(L, x, w, b, **conv):
    x4, w4, x4t, w4t = _conv_lower_args(L, x, w)
    bt = L.types[2]
    b4 = _r_from_blocked(L.R, b, bt) if bt.ndim == 5 else b
    y = nn._conv_bias_lower(_NchwContext(L, [x4t, w4t, _bias_nchw(bt)]), x4, w4, b4, **conv)
    return _r_to_blocked(L.R, y, L.out)


# -- writing: MegEngine's Convolution / ConvBias with the blocked format ------------------
def _spec(opr_type: str, param: str, sparse: str, fmt: str, fields, decode) -> MgeOpr:
    return MgeOpr(opr_type, param, match={"sparse": sparse, "format": fmt}, fields=fields,
                  decode=decode, extra=(("ExecutionPolicy", {}),))


def _conv_emit(opr_type: str, param: str, fields):
    def emit(em, types, p, inputs):
        kind, pack = conv_kind(types[0], types[1])
        sparse = "GROUP" if kind in ("channel", "group") else "DENSE"
        spec = _spec(opr_type, param, sparse, FORMATS[pack], fields, None)
        return em.opr(spec, spec.fields_for(p), inputs)
    return MgeComposite(emit)


_CONV_PARAMS = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "compute_mode": "DEFAULT"}

register(OpDef("conv2d_nchwxx", eager=_conv_eager, infer=_conv_infer, lower=_conv_lower,
               params=dict(_CONV_PARAMS),
               mge=_conv_emit("Convolution", "Convolution", nn._conv2d_fields),
               vjp=NOT_DIFFERENTIABLE))
register(OpDef("conv_bias_nchwxx", eager=_conv_bias_eager, infer=_conv_bias_infer,
               lower=_conv_bias_lower, params={**_CONV_PARAMS, "nonline": "IDENTITY"},
               mge=_conv_emit("ConvBiasForward", "ConvBias",
                              lambda p: {**nn._conv2d_fields(p), "nonlineMode": p["nonline"]}),
               vjp=NOT_DIFFERENTIABLE))


# -- pooling -------------------------------------------------------------------------------
def _pool_infer(x, **pool):
    if x.ndim != 5 or x.shape[4] not in FORMATS:
        raise ShapeError(f"pool2d_nchwxx: input must be (N, C/p, H, W, p) with p 8 or 4; got {x}")
    n, cb, h, w, p = x.shape
    out = nn._pool_infer(TensorType((n, cb * p, h, w), x.dtype), **pool)
    return _blocked_type(out, p)


def _pool_eager(x, **pool):
    return to_blocked(nn._pool_eager(from_blocked(x), **pool), x.shape[4])


def _pool_lower(L, x, **pool):
    y = nn._pool_lower(L, _r_from_blocked(L.R, x, L.types[0]), **pool)
    return _r_to_blocked(L.R, y, L.out)


def _pool_emit(em, types, p, inputs):
    base = nn.POOLING
    spec = MgeOpr(base.type, base.param, match={"format": FORMATS[types[0].shape[4]]},
                  fields=base.fields)
    return em.opr(spec, spec.fields_for(p), inputs)


register(OpDef("pool2d_nchwxx", eager=_pool_eager, infer=_pool_infer, lower=_pool_lower,
               params={"mode": "max", "kernel": (2, 2), "stride": (2, 2), "padding": (0, 0)},
               mge=MgeComposite(_pool_emit), vjp=NOT_DIFFERENTIABLE))


# -- adaptive pooling and resize: MegEngine's AdaptivePooling / Resize with format=NCHW88|44
def _blocked_infer(name: str, base_infer):
    def infer(x, *size_input, **params):      # resize: its traced size (shape_input)
        if x.ndim != 5 or x.shape[4] not in FORMATS:
            raise ShapeError(f"{name}: input must be (N, C/p, H, W, p) with p 8 or 4; got {x}")
        n, cb, h, w, p = x.shape
        return _blocked_type(base_infer(TensorType((n, cb * p, h, w), x.dtype), *size_input,
                                        **params), p)
    return infer


def _blocked_eager(base_eager):
    return lambda x, *size_input, **params: to_blocked(
        base_eager(from_blocked(x), *size_input, **params), x.shape[4])


def _blocked_lower(base_lower):
    def lower(L, x, *size_input, **params):
        n, cb, h, w, p = L.types[0].shape
        y = base_lower(_NchwContext(L, [TensorType((n, cb * p, h, w), L.types[0].dtype)]),
                       _r_from_blocked(L.R, x, L.types[0]), *size_input, **params)
        return _r_to_blocked(L.R, y, L.out)
    return lower


def _adaptive_emit(em, types, p, inputs):
    mode = "MAX_" if p["mode"] == "max" else "AVERAGE"
    return em.opr(image.ADAPTIVE_POOLING, {"mode": mode, "format": FORMATS[types[0].shape[4]]},
                  [inputs[0], em.const(np.array(p["out"], np.int32))])


def _resize_emit(em, types, p, inputs):
    return em.opr(warp.RESIZE, {"imode": warp._RESIZE_MODES[p["mode"]],
                                "format": FORMATS[types[0].shape[4]]},
                  [inputs[0], inputs[1] if len(inputs) > 1 else warp._size_const(em, p["size"])])


register(OpDef("adaptive_pool2d_nchwxx", params={"mode": "average", "out": (1, 1)},
               eager=_blocked_eager(image._adaptive_eager),
               infer=_blocked_infer("adaptive_pool2d_nchwxx", image._adaptive_infer),
               lower=_blocked_lower(image._adaptive_lower), mge=MgeComposite(_adaptive_emit),
               vjp=NOT_DIFFERENTIABLE))
register(OpDef("resize_nchwxx", params={"size": (1, 1), "mode": "linear"}, shape_input=True,
               shape_param="size",
               eager=_blocked_eager(warp._resize_eager),
               infer=_blocked_infer("resize_nchwxx", warp._resize_infer),
               lower=_blocked_lower(warp._resize_lower), mge=MgeComposite(_resize_emit),
               opaque_in_optimize=True, vjp=NOT_DIFFERENTIABLE))
