"""Neural-network operators: convolution, pooling, batch normalization."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from . import quantized_lower
from . import eager_kernels
from ._rules import same_dtype
from .conv import conv_input_grad, conv_vjp, conv_weight_grad
from .grad_norm import batch_norm_train_vjp
from .registry import MgeChoice, MgeOpr, OpDef, register

# -- conv2d ---------------------------------------------------------------------------
# Weights are MegEngine's: dense (OC, IC, KH, KW), grouped 5-D (G, OC/G, IC/G, KH, KW).


def _conv_geometry(x: TensorType, w: TensorType, stride, padding, dilation):
    if x.ndim != 4:
        raise ShapeError(f"conv2d: input must be 4-d NCHW; got {x}")
    if w.ndim == 4:
        groups, (oc, icg, kh, kw) = 1, w.shape
        ocg = oc
    elif w.ndim == 5:
        groups, ocg, icg, kh, kw = w.shape
        oc = groups * ocg
    else:
        raise ShapeError(f"conv2d: weight must be 4-d (OC,IC,KH,KW) or 5-d grouped; got {w}")
    if x.shape[1] != groups * icg:
        raise ShapeError(f"conv2d: input has {x.shape[1]} channels, weight {w} expects "
                         f"{groups * icg}")
    oh = (x.shape[2] + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"conv2d: kernel {kh}x{kw} does not fit input {x} with padding "
                         f"{padding}")
    return groups, oc, ocg, icg, kh, kw, oh, ow


_COMPUTE_MODES = ("DEFAULT", "FLOAT32")


def _conv2d_infer(x, w, *, stride, padding, dilation, compute_mode="DEFAULT"):
    same_dtype("conv2d", x, w)
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"conv2d: compute_mode must be one of {_COMPUTE_MODES}; got "
                         f"{compute_mode!r}")
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or min(padding) < 0:
        raise ValueError(f"conv2d: stride/dilation must be positive and padding >= 0; got "
                         f"stride={stride}, padding={padding}, dilation={dilation}")
    _, oc, _, _, _, _, oh, ow = _conv_geometry(x, w, stride, padding, dilation)
    return TensorType((x.shape[0], oc, oh, ow), x.dtype)


def _conv2d_eager(x, w, *, stride, padding, dilation, compute_mode="DEFAULT"):
    g, oc, ocg, icg, kh, kw, oh, ow = _conv_geometry(TensorType.of(x), TensorType.of(w),
                                                     stride, padding, dilation)
    dtype = x.dtype
    if compute_mode == "FLOAT32" and dtype == np.float16:
        x, w = x.astype(np.float32), w.astype(np.float32)
    out = eager_kernels.conv2d(x, w.reshape(g, ocg, icg, kh, kw), g, stride, padding,
                               dilation, (oh, ow))
    return out.astype(dtype, copy=False)


def _conv2d_lower(L, x, w, *, stride, padding, dilation, compute_mode="DEFAULT"):
    wt = L.types[1]
    groups = 1
    if wt.ndim == 5:
        groups = wt.shape[0]
        w = L.R.reshape(w, (wt.shape[0] * wt.shape[1],) + wt.shape[2:])
    if compute_mode == "FLOAT32" and wt.dtype == "float16":   # float16 in and out, float32 sums
        y = L.R.nn.conv2d(x, w, strides=stride, padding=padding, dilation=dilation,
                          groups=groups, out_dtype="float32")
        return L.R.astype(y, "float16")
    return L.R.nn.conv2d(x, w, strides=stride, padding=padding, dilation=dilation,
                         groups=groups)


def _conv2d_fields(p):
    return {"pad_h": p["padding"][0], "pad_w": p["padding"][1],
            "stride_h": p["stride"][0], "stride_w": p["stride"][1],
            "dilate_h": p["dilation"][0], "dilate_w": p["dilation"][1],
            "compute_mode": p.get("compute_mode", "DEFAULT")}


def _conv2d_decode(f):
    return {"stride": (f["stride_h"], f["stride_w"]), "padding": (f["pad_h"], f["pad_w"]),
            "dilation": (f["dilate_h"], f["dilate_w"]),
            "compute_mode": f.get("compute_mode", "DEFAULT")}


# MegEngine tells grouped from dense convolution by `sparse`; the weight's rank says which.
_CONV = {sparse: MgeOpr("Convolution", "Convolution", fields=_conv2d_fields,
                        decode=_conv2d_decode, match={"sparse": sparse},
                        extra=(("ExecutionPolicy", {}),))
         for sparse in ("DENSE", "GROUP")}

register(OpDef(
    "conv2d", eager=_conv2d_eager, infer=_conv2d_infer, lower=_conv2d_lower,
    params={"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "compute_mode": "DEFAULT"},
    mge=MgeChoice(lambda types: _CONV["GROUP" if types[1].ndim == 5 else "DENSE"],
                  tuple(_CONV.values())),
    vjp=conv_vjp(2),
))

# -- conv_bias: MegEngine's ConvBiasForward (conv + bias + nonlinearity in one opr) --------
_NONLINE = {"IDENTITY": lambda v: v, "RELU": lambda v: np.maximum(v, 0),
            "SIGMOID": lambda v: 1 / (1 + np.exp(-v))}


def _conv_bias_infer(x, w, b, *, nonline, **conv):
    out = _conv2d_infer(x, w, **conv)
    if nonline not in _NONLINE:
        raise ValueError(f"conv_bias: nonline must be one of {sorted(_NONLINE)}; got {nonline!r}")
    if b.ndim != 4 or any(d not in (1, o) for d, o in zip(b.shape, out.shape)) or \
            b.shape[1] != out.shape[1]:
        raise ShapeError(f"conv_bias: bias must be (1, {out.shape[1]}, 1, 1) or broadcast to "
                         f"the output {out}; got {b}")
    return out


def _conv_bias_eager(x, w, b, *, nonline, **conv):
    y = _conv2d_eager(x, w, **conv).astype(np.float64) + b
    return _NONLINE[nonline](y).astype(x.dtype)


def _conv_bias_lower(L, x, w, b, *, nonline, **conv):
    y = L.R.add(_conv2d_lower(L, x, w, **conv), b)
    return {"IDENTITY": y, "RELU": L.R.nn.relu(y), "SIGMOID": L.R.sigmoid(y)}[nonline]


def _conv_bias_vjp(V, inputs, outputs, grads, *, nonline, **conv):
    """Through the nonlinearity (from the output), then conv2d's rule; the bias gets the
    gradient summed over what it was broadcast to."""
    (x, w, b), (y,), (g,) = inputs, outputs, grads
    if nonline == "RELU":
        g = V.select(V.apply("gt", y, V.const(0, y)), g)
    elif nonline == "SIGMOID":
        g = g * y * (V.const(1, y) - y)
    geometry = (2, conv["stride"], conv["padding"], conv["dilation"])
    gx = conv_input_grad(V, g, w, tuple(x.shape), *geometry) if V.needs_grad(0) else None
    gw = conv_weight_grad(V, x, g, tuple(w.shape), *geometry) if V.needs_grad(1) else None
    return gx, gw, V.sum_to(g, tuple(b.shape))


_CONV_BIAS = {sparse: MgeOpr(
    "ConvBiasForward", "ConvBias", match={"sparse": sparse},
    fields=lambda p: {**_conv2d_fields(p), "nonlineMode": p["nonline"]},
    decode=lambda f: {**_conv2d_decode(f), "nonline": f["nonlineMode"]},
    extra=(("ExecutionPolicy", {}),)) for sparse in ("DENSE", "GROUP")}

register(OpDef(
    "conv_bias", eager=_conv_bias_eager, infer=_conv_bias_infer, lower=_conv_bias_lower,
    params={"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "nonline": "IDENTITY",
            "compute_mode": "DEFAULT"},
    mge=MgeChoice(lambda types: _CONV_BIAS["GROUP" if types[1].ndim == 5 else "DENSE"],
                  tuple(_CONV_BIAS.values())),
    vjp=_conv_bias_vjp,
))

# -- pooling --------------------------------------------------------------------------
_POOL_MODES = {"max": "MAX_", "average": "AVERAGE",
               "average_count_exclude_padding": "AVERAGE_COUNT_EXCLUDE_PADDING"}


def _pool_infer(x, *, mode, kernel, stride, padding):
    if x.ndim != 4:
        raise ShapeError(f"pool2d: input must be 4-d NCHW; got {x}")
    if mode not in _POOL_MODES:
        raise ValueError(f"pool2d: mode must be one of {sorted(_POOL_MODES)}; got {mode!r}")
    if min(kernel) <= 0 or min(stride) <= 0 or min(padding) < 0:
        raise ValueError(f"pool2d: window and stride must be positive and padding >= 0; got "
                         f"window={tuple(kernel)}, stride={tuple(stride)}, "
                         f"padding={tuple(padding)}")
    oh = (x.shape[2] + 2 * padding[0] - kernel[0]) // stride[0] + 1
    ow = (x.shape[3] + 2 * padding[1] - kernel[1]) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"pool2d: window {kernel} does not fit input {x}")
    return TensorType((x.shape[0], x.shape[1], oh, ow), x.dtype)


def _pool_eager(x, *, mode, kernel, stride, padding):
    out_t = _pool_infer(TensorType.of(x), mode=mode, kernel=kernel, stride=stride,
                        padding=padding)
    out_hw = out_t.shape[2:]
    if mode == "max":
        return eager_kernels.pool2d_max(x, kernel, stride, padding, out_hw)
    total = eager_kernels.pool2d_sum(x, kernel, stride, padding, out_hw)
    if mode == "average":
        return (total / (kernel[0] * kernel[1])).astype(x.dtype)
    ones = np.ones((1, 1) + x.shape[2:])
    count = eager_kernels.pool2d_sum(ones, kernel, stride, padding, out_hw)
    # a window lying wholly in the padding averages to 0 (MegEngine, TVM's avg_pool2d)
    return (total / np.maximum(count, 1)).astype(x.dtype)


def _pool_lower(L, x, *, mode, kernel, stride, padding):
    if mode == "max":
        return L.R.nn.max_pool2d(x, pool_size=kernel, strides=stride, padding=padding)
    if L.types[0].quant is not None:        # MegEngine's quantized dtypes: rounded averages
        out_hw = L.out.shape[2:]
        count = np.full(out_hw, kernel[0] * kernel[1], np.float32) if mode == "average" else \
            eager_kernels.pool2d_sum(np.ones((1, 1) + L.types[0].shape[2:]), kernel, stride,
                                     padding, out_hw)
        return quantized_lower.lower_average(L, x, lambda xf: L.R.nn.avg_pool2d(
            xf, pool_size=kernel, strides=stride, padding=padding,
            count_include_pad=(mode == "average")), count)
    return L.R.nn.avg_pool2d(x, pool_size=kernel, strides=stride, padding=padding,
                             count_include_pad=(mode == "average"))


def _pool_vjp(V, inputs, outputs, grads, *, mode, kernel, stride, padding):
    """Each output's gradient spread over its window (MegEngine's PoolingBackward): for max
    onto the window's elements equal to the maximum (all of them on ties, as MegEngine),
    for average divided by the window's size (or its count without padding). The CPU
    lowering recognises the max form's subgraph (relay_bridge/cpu/pool_grad.py: -inf pad,
    per tap where(patch == y, g, 0), shifted sums, crop) and computes it on NCHW16c."""
    (x,), (y,), (g,) = inputs, outputs, grads
    n, c, h, w = x.shape
    oh, ow = y.shape[2:]
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    if mode == "max":
        xp = x if not (ph or pw) else V.apply(
            "pad", x, pad_width=((0, 0), (0, 0), (ph, ph), (pw, pw)), mode="constant",
            value=float("-inf"))

        def part(i, j):
            patch = V.apply("subtensor", xp, index=(
                (2, i, i + sh * (oh - 1) + 1, sh, None),
                (3, j, j + sw * (ow - 1) + 1, sw, None)))
            return V.select(V.apply("eq", patch, y), g)
    else:
        if mode == "average":
            spread = g / V.const(kh * kw, g)
        else:
            ones = np.ones((1, 1, h, w))
            count = eager_kernels.pool2d_sum(ones, kernel, stride, padding, (oh, ow))
            spread = g / V.const(count, g)

        def part(i, j):
            return spread
    return (_spread_windows(V, part, (n, c, h, w), (oh, ow), kernel, stride, padding),)


def _spread_windows(V, part, x_shape, out_hw, kernel, stride, padding):
    """The input gradient of a pooling whose window tap (i, j) receives `part(i, j)`
    (N, C, OH, OW): tap i of output row q lands on padded row i + s*q, so padded row
    s*a + r sums the taps i = r + s*t at q = a - t. Each phase (r, c) is a sum of
    shifted parts (element-wise work, not a transposed convolution that multiplies
    by a one-hot kernel); the phases interleave, and the padding is cropped."""
    n, c, h, w = x_shape
    (oh, ow), (kh, kw), (sh, sw), (ph, pw) = out_hw, kernel, stride, padding
    th, tw = -(-kh // sh), -(-kw // sw)           # taps per phase (at most)
    qh, qw = oh + th - 1, ow + tw - 1             # phase rows and columns
    rows = []
    for r in range(sh):
        cols = []
        for q in range(sw):
            total = None
            for i in range(r, kh, sh):
                for j in range(q, kw, sw):
                    term = part(i, j)
                    a, b = i // sh, j // sw
                    if (a, b, th - 1 - a, tw - 1 - b) != (0, 0, 0, 0):
                        term = V.apply("pad", term, pad_width=(
                            (0, 0), (0, 0), (a, th - 1 - a), (b, tw - 1 - b)))
                    total = term if total is None else total + term
            if total is None:
                total = V.apply("broadcast_to", V.const(0, part(0, 0)),
                                shape=(n, c, qh, qw))
            cols.append(V.apply("expand_dims", total, axis=(3, 5)))
        rows.append(cols[0] if sw == 1 else V.apply("concat", *cols, axis=5))
    full = rows[0] if sh == 1 else V.apply("concat", *rows, axis=3)   # (N, C, QH, s, QW, s)
    full = V.apply("reshape", full, shape=(n, c, qh * sh, qw * sw))
    lack_h, lack_w = max(0, ph + h - qh * sh), max(0, pw + w - qw * sw)
    if lack_h or lack_w:                    # rows no window reaches: zero gradient
        full = V.apply("pad", full, pad_width=((0, 0), (0, 0), (0, lack_h), (0, lack_w)))
    return V.apply("subtensor", full, index=((2, ph, ph + h, None, None),
                                             (3, pw, pw + w, None, None)))


POOLING = MgeOpr(
    "PoolingV1", "Pooling",
    fields=lambda p: {"mode": _POOL_MODES[p["mode"]], "pad_h": p["padding"][0],
                      "pad_w": p["padding"][1], "stride_h": p["stride"][0],
                      "stride_w": p["stride"][1], "window_h": p["kernel"][0],
                      "window_w": p["kernel"][1]},
    decode=lambda f: {"mode": {v: k for k, v in _POOL_MODES.items()}[f["mode"]],
                      "kernel": (f["window_h"], f["window_w"]),
                      "stride": (f["stride_h"], f["stride_w"]),
                      "padding": (f["pad_h"], f["pad_w"])})


register(OpDef(
    "pool2d", eager=_pool_eager, infer=_pool_infer, lower=_pool_lower,
    params={"mode": "max", "kernel": (2, 2), "stride": (2, 2), "padding": (0, 0)},
    mge=POOLING,
    vjp=_pool_vjp,
))

# -- batch normalization (inference) --------------------------------------------------
# Inputs follow MegEngine's BatchNorm opr: x, weight (scale), bias, running mean, var;
# statistics are (1, C, 1, 1).


def _bn_infer(x, weight, bias, mean, var, *, eps):
    if x.ndim != 4:
        raise ShapeError(f"batch_norm: input must be 4-d NCHW; got {x}")
    stat = (1, x.shape[1], 1, 1)
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", mean),
                    ("running_var", var)):
        if t.shape != stat:
            raise ShapeError(f"batch_norm: {name} must have shape {stat}; got {t}")
        if t.dtype != x.dtype:
            raise DTypeError(f"batch_norm: {name} is {t}, input is {x}")
    return x


def _bn_eager(x, weight, bias, mean, var, *, eps):
    # one multiply-add over x with per-channel scale and shift folded in float64
    scale = weight / np.sqrt(var.astype(np.float64) + eps)
    shift = bias - mean * scale
    out = x * scale.astype(x.dtype)
    out += shift.astype(x.dtype)
    return out


def _bn_lower(L, x, weight, bias, mean, var, *, eps):
    R = L.R
    scale = R.multiply(R.rsqrt(R.add(var, L.const(eps, L.types[0].dtype))), weight)
    return R.add(R.multiply(R.subtract(x, mean), scale), bias)


def _bn_vjp(V, inputs, outputs, grads, *, eps):
    """y = (x - mean) * rstd * w + b with the given statistics (inference mode)."""
    (x, w, b, mean, var), (g,) = inputs, grads
    axes = (0, 2, 3)
    rstd = V.const(1, x) / V.apply("sqrt", var + V.const(eps, var))
    centered = x - mean
    total = V.apply("reduce", g, mode="sum", axis=axes, keepdims=True)
    g_centered = V.apply("reduce", g * centered, mode="sum", axis=axes, keepdims=True)
    gx = g * (w * rstd)
    gw = g_centered * rstd
    gmean = V.apply("neg", total * w * rstd)
    gvar = g_centered * w * rstd * rstd * rstd * V.const(-0.5, x)
    return gx, gw, total, gmean, gvar


register(OpDef(
    "batch_norm", eager=_bn_eager, infer=_bn_infer, lower=_bn_lower, params={"eps": 1e-5},
    mge=MgeOpr("BatchNormV1", "BN",
               fields=lambda p: {"param_dim": "DIM_1C11", "fwd_mode": "INFERENCE",
                                 "epsilon": p["eps"]},
               decode=lambda f: {"eps": f["epsilon"]}, outputs=4, result=3),
    vjp=_bn_vjp,
))


def _bn_train_infer(x, weight, bias, *, eps):
    if x.ndim != 4:
        raise ShapeError(f"batch_norm: input must be 4-d NCHW; got {x}")
    stat = TensorType((1, x.shape[1], 1, 1), x.dtype)
    return x, stat, stat


def _bn_train_eager(x, weight, bias, *, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(0, 2, 3), keepdims=True)
    var = x64.var(axis=(0, 2, 3), keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps) * weight + bias
    return y.astype(x.dtype), mean.astype(x.dtype), var.astype(x.dtype)


# Training-mode statistics: eager only. MegEngine refuses to dump it ("maybe you forget
# to do model.eval()?"), and compiling training graphs is not supported yet.
register(OpDef("batch_norm_train", eager=_bn_train_eager, infer=_bn_train_infer,
               params={"eps": 1e-5}, vjp=batch_norm_train_vjp))


# -- assert_equal: MegEngine's AssertEqual (testcase checks) ------------------------------
# Passes `get` through; its third input is err = max(|e-g| / max(min(|e|,|g|), 1)). The
# check itself is done by whoever runs the testcase (LoadedGraph.run_testcases), since a
# compiled kernel cannot raise.
def _assert_infer(expect, get, err, *, maxerr, verbose):
    if expect.shape != get.shape:
        raise ShapeError(f"assert_equal: expect {expect} and get {get} differ in shape")
    return get


# A check that passes `get` through: so does its gradient (none to expect and err).
register(OpDef("assert_equal", params={"maxerr": 1e-4, "verbose": False},
               infer=_assert_infer, eager=lambda e, g, err, **_: g,
               lower=lambda L, e, g, err, **_: g,
               vjp=lambda V, inputs, outputs, grads, **_: (None, grads[0], None),
               mge=MgeOpr("AssertEqual", "AssertEqual",
                          fields=lambda p: {"maxerr": p["maxerr"], "verbose": p["verbose"]},
                          decode=lambda f: {"maxerr": f["maxerr"], "verbose": bool(f["verbose"])})))
