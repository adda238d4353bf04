"""Samples of the ops on MegEngine's quantized dtypes (quantized_astype,
quantized_conv_bias, quantized_batch_conv_bias, quantized_elemwise). Scales are powers of
two, so every scaling is exact and the float64 references (loops, C rounding: halves away from zero) see the
same halves as MegEngine's float32 TypeCvt."""
from __future__ import annotations

import math

import numpy as np

from megtrace.core.tensor import dtype as D

from .samples import Sample, _conv_ref

_RANGES = {"QuantizedS8": (-128, 127), "Quantized8Asymm": (0, 255),
           "QuantizedS32": (-2 ** 31, 2 ** 31 - 1)}


def _c_round(v: float) -> float:
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _meta(dtype) -> tuple[str, float, int]:
    m = dtype.metadata["mgb_dtype"]
    return m["name"], m["scale"], m.get("zero_point", 0)


def _spec(dtype):
    name, scale, zp = _meta(dtype)
    return (name, scale, zp)


def _quantize_ref(values, dtype) -> np.ndarray:
    name, scale, zp = _meta(dtype)
    lo, hi = _RANGES[name]
    q = [min(max(_c_round(float(v) / scale) + zp, lo), hi) for v in np.ravel(values)]
    return np.array(q, np.float64).reshape(np.shape(values))


def _stored(arr) -> np.ndarray:
    name, scale, zp = _meta(arr.dtype)
    return arr.view(np.dtype(arr.dtype.str)).astype(np.float64) - zp


def _quantized(dtype, *shape, lo=-100, hi=100):
    """Random stored integers of `dtype` (plus a few extremes)."""
    def make(rng):
        v = rng.integers(lo, hi + 1, size=shape)
        v.flat[:2] = [lo, hi]
        return v.astype(np.dtype(dtype.str)).view(dtype)
    return make


def _floats(*shape, scale=0.25):
    """Floats with exact halves of the `scale` grid and values beyond the int8 range."""
    def make(rng):
        x = rng.uniform(-40, 40, size=shape)
        x.flat[:5] = [scale / 2, -scale / 2, 3 * scale / 2, 1000.0, -1000.0]
        return x.astype(np.float32)
    return make


def _maker(*parts):
    return lambda rng: [p(rng) for p in parts]


Q8, Q8B, QU8 = D.qint8(0.25), D.qint8(0.5), D.quint8(0.125, 100)


def _astype_ref(x, *, dtype):
    values = _stored(x) * _meta(x.dtype)[1] if x.dtype.metadata else x.astype(np.float64)
    if isinstance(dtype, tuple):
        name, scale, zp = dtype
        target = D.create_quantized_dtype(
            {"QuantizedS8": D._builtin_quant_dtypes["qint8"],
             "Quantized8Asymm": D._builtin_quant_dtypes["quint8"],
             "QuantizedS32": D._builtin_quant_dtypes["qint32"]}[name], scale,
            zp if name == "Quantized8Asymm" else None)
        return _quantize_ref(values, target)
    return values


def _conv_bias_ref(x, w, *bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                   nonlinear_mode="identity", dtype=None):
    acc = _conv_ref(_stored(x), _stored(w), stride, padding, dilation)
    if bias:
        acc = acc + _stored(bias[0]).reshape(1, -1, 1, 1)
    if nonlinear_mode == "relu":
        acc = np.maximum(acc, 0)
    scale = _meta(x.dtype)[1] * _meta(w.dtype)[1]
    name, out_scale, zp = dtype
    lo, hi = _RANGES[name]
    q = [min(max(_c_round(float(v) * scale / out_scale) + zp, lo), hi) for v in acc.ravel()]
    return np.array(q).reshape(acc.shape)


_EMT = {"qadd": lambda a, b: a + b, "qfuse_add_relu": lambda a, b: max(a + b, 0.0),
        "qmul": lambda a, b: a * b, "qsub": lambda a, b: a - b,
        "qmax": max, "qmin": min}


def _emt_ref(*xs, mode, dtype):
    values = [(_stored(x) * _meta(x.dtype)[1]).ravel() for x in xs]
    out = [_EMT[mode](*vs) for vs in zip(*values)]
    name, scale, zp = dtype
    lo, hi = _RANGES[name]
    return np.array([min(max(_c_round(v / scale) + zp, lo), hi) for v in out]).reshape(
        xs[0].shape)


SAMPLES = [
    Sample("quantized_astype", _maker(_floats(4, 6)), {"dtype": _spec(Q8)}, _astype_ref,
           tag="to-qint8"),
    Sample("quantized_astype", _maker(_floats(3, 5, scale=0.125)), {"dtype": _spec(QU8)},
           _astype_ref, tag="to-quint8"),
    Sample("quantized_astype", _maker(_quantized(Q8, 3, 4)), {"dtype": "float32"},
           _astype_ref, tag="to-float32"),
    Sample("quantized_astype", _maker(_quantized(QU8, 2, 5, lo=0, hi=255)),
           {"dtype": _spec(Q8B)}, _astype_ref, tag="quint8-to-qint8"),
    Sample("quantized_conv_bias",
           _maker(_quantized(Q8, 2, 4, 7, 6), _quantized(D.qint8(0.5), 6, 4, 3, 3),
                  _quantized(D.qint32(0.125), 1, 6, 1, 1, lo=-500, hi=500)),
           {"padding": (1, 1), "nonlinear_mode": "relu", "dtype": _spec(D.qint8(4.0))},
           _conv_bias_ref),
    Sample("quantized_conv_bias",
           _maker(_quantized(Q8, 1, 4, 6, 6), _quantized(D.qint8(0.5), 2, 3, 2, 3, 3)),
           {"stride": (2, 1), "groups": 2, "dtype": _spec(D.qint8(2.0))}, _conv_bias_ref,
           tag="grouped-no-bias"),
]
for _mode in sorted(_EMT):
    SAMPLES.append(Sample("quantized_elemwise",
                          _maker(_quantized(Q8, 3, 5), _quantized(Q8B, 3, 5)),
                          {"mode": _mode, "dtype": _spec(D.qint8(0.5))}, _emt_ref, tag=_mode))


def _deconv_ref(x, w, *, stride=(1, 1), padding=(0, 0), output_padding=(0, 0),
                dilation=(1, 1), dtype=None):
    """Each input pixel adds its weighted kernel into the output (loops, float64)."""
    xs, ws = _stored(x), _stored(w)
    n, ic, h, wd = xs.shape
    oc, kh, kw = ws.shape[1:]
    full = np.zeros((n, oc, (h - 1) * stride[0] + dilation[0] * (kh - 1) + 1 + output_padding[0],
                     (wd - 1) * stride[1] + dilation[1] * (kw - 1) + 1 + output_padding[1]))
    for i in range(h):
        for j in range(wd):
            for a in range(kh):
                for b in range(kw):
                    full[:, :, i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1]] \
                        += xs[:, :, i, j] @ ws[:, :, a, b]
    acc = full[:, :, padding[0]:full.shape[2] - padding[0], padding[1]:full.shape[3] - padding[1]]
    scale = _meta(x.dtype)[1] * _meta(w.dtype)[1]
    name, out_scale, zp = dtype
    lo, hi = _RANGES[name]
    q = [min(max(_c_round(float(v) * scale / out_scale) + zp, lo), hi) for v in acc.ravel()]
    return np.array(q).reshape(acc.shape)


SAMPLES.append(Sample("quantized_conv_transpose",
                      _maker(_quantized(Q8, 2, 4, 5, 6), _quantized(D.qint8(0.5), 4, 3, 3, 2)),
                      {"stride": (2, 1), "padding": (1, 0), "dtype": _spec(D.qint8(2.0))},
                      _deconv_ref))


def _batch_conv_bias_ref(x, w, *bias, **params):
    """Sample n convolved with weight[n] by _conv_bias_ref."""
    return np.concatenate([_conv_bias_ref(x[n:n + 1], w[n], *bias, **params)
                           for n in range(x.shape[0])])


SAMPLES += [
    Sample("quantized_batch_conv_bias",
           _maker(_quantized(Q8, 2, 3, 6, 7), _quantized(D.qint8(0.5), 2, 4, 3, 3, 3),
                  _quantized(D.qint32(0.125), 1, 4, 1, 1, lo=-500, hi=500)),
           {"padding": (1, 1), "stride": (2, 1), "nonlinear_mode": "relu",
            "dtype": _spec(D.qint8(4.0))}, _batch_conv_bias_ref),
    Sample("quantized_batch_conv_bias",
           _maker(_quantized(Q8, 3, 2, 5, 5), _quantized(D.qint8(0.5), 3, 2, 2, 2, 2)),
           {"dilation": (2, 1), "dtype": _spec(D.qint8(2.0))}, _batch_conv_bias_ref,
           tag="no-bias"),
]
