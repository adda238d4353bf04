"""Samples of the float16 forms enable_io16xc32 writes: Convolution, ConvBias and MatrixMul
with compute_mode=FLOAT32 and Reduce with data_type=FLOAT_O16xC32 (float16 in and out,
float32 sums). Inputs are small integers, so every sum is exact in float16 and eager,
compiled and reference agree to the bit."""
from __future__ import annotations

import numpy as np

from .samples import Sample, _conv_ref, _pool_ref, f32


def f16_ints(*shape, lo=-2, hi=3):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(np.float16)


def _f16(fn):
    return lambda *a, **p: fn(*[x.astype(np.float64) for x in a], **p).astype(np.float16)


SAMPLES = [
    Sample("conv2d", lambda rng: [f16_ints(1, 3, 6, 6)(rng), f16_ints(4, 3, 3, 3)(rng)],
           {"padding": (1, 1), "compute_mode": "FLOAT32"},
           ref=_f16(lambda x, w, **p: _conv_ref(x, w, p.get("stride", (1, 1)), p["padding"],
                                                (1, 1))),
           tag="f16-float32-compute"),
    Sample("conv_bias", lambda rng: [f16_ints(1, 2, 5, 5)(rng), f16_ints(3, 2, 3, 3)(rng),
                                     f16_ints(1, 3, 1, 1)(rng)],
           {"nonline": "RELU", "compute_mode": "FLOAT32"},
           ref=_f16(lambda x, w, b, **p: np.maximum(_conv_ref(x, w, (1, 1), (0, 0), (1, 1)) + b,
                                                    0)),
           tag="f16-float32-compute"),
    Sample("matmul", lambda rng: [f16_ints(4, 6)(rng), f16_ints(5, 6)(rng)],
           {"transpose_b": True, "compute_mode": "FLOAT32"},
           ref=_f16(lambda a, b, **p: np.einsum("ik,jk->ij", a, b)), tag="f16-float32-compute"),
    Sample("reduce", lambda rng: [f16_ints(2, 8, 3)(rng)],
           {"mode": "sum", "axis": 1, "data_type": "FLOAT_O16xC32"},
           ref=_f16(lambda x, **p: x.sum(axis=1)), tag="f16-float32-sums"),
]


# -- NCHW88 / NCHW44 (megtrace/ops/nchwxx.py): the references unblock by MegEngine's index
# formulas, e.g. dense w[ob, ib, r, s, ii, oi] = W[ob*p + oi, ib*p + ii, r, s]
def _unblock(x):
    n, cb, h, w, p = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, cb * p, h, w)


def _unblock_weight(w, kind):
    if kind == "hybrid":                   # (OC/p, FH, FW, IC, p)
        ob, fh, fw, ic, p = w.shape
        return w.transpose(0, 4, 3, 1, 2).reshape(ob * p, ic, fh, fw)
    if kind == "dense":                    # (OC/p, IC/p, FH, FW, p_ic, p_oc)
        ob, ib, fh, fw, p, _ = w.shape
        return w.transpose(0, 5, 1, 4, 2, 3).reshape(ob * p, ib * p, fh, fw)
    if kind == "channel":                  # (G/p, 1, 1, FH, FW, p)
        gb, _, _, fh, fw, p = w.shape
        return w.transpose(0, 5, 1, 2, 3, 4).reshape(gb * p, 1, 1, fh, fw)
    g, ob, ib, fh, fw, p, _ = w.shape      # (G, OCg/p, ICg/p, FH, FW, p_ic, p_oc)
    return w.transpose(0, 1, 6, 2, 5, 3, 4).reshape(g, ob * p, ib * p, fh, fw)


def _block(y, p):
    n, c, h, w = y.shape
    return y.reshape(n, c // p, p, h, w).transpose(0, 1, 3, 4, 2)


def _conv_nchwxx_ref(kind, p, bias=False, relu=False):
    def ref(x, w, *rest, **params):
        x4 = x if x.ndim == 4 else _unblock(x)
        y = _conv_ref(x4, _unblock_weight(w, kind), params.get("stride", (1, 1)),
                      params.get("padding", (0, 0)), (1, 1))
        if bias:
            y = y + _unblock(rest[0].astype(np.float64))
        return _block(np.maximum(y, 0) if relu else y, p)
    return ref


SAMPLES += [
    Sample("conv2d_nchwxx", lambda rng: [f32(1, 3, 7, 7)(rng), f32(2, 3, 3, 3, 8)(rng)],
           {"padding": (1, 1), "stride": (2, 2)}, ref=_conv_nchwxx_ref("hybrid", 8),
           tag="hybrid-nchw88"),
    Sample("conv2d_nchwxx", lambda rng: [f32(1, 2, 5, 5, 4)(rng), f32(3, 2, 3, 3, 4, 4)(rng)],
           {"padding": (1, 1)}, ref=_conv_nchwxx_ref("dense", 4), tag="dense-nchw44"),
    Sample("conv2d_nchwxx", lambda rng: [f32(1, 2, 6, 6, 8)(rng), f32(2, 1, 1, 3, 3, 8)(rng)],
           {"padding": (1, 1)}, ref=_conv_nchwxx_ref("channel", 8), tag="channel-nchw88"),
    Sample("conv2d_nchwxx", lambda rng: [f32(1, 4, 5, 5, 4)(rng),
                                         f32(2, 1, 2, 3, 3, 4, 4)(rng)],
           {}, ref=_conv_nchwxx_ref("group", 4), tag="group-nchw44"),
    Sample("conv_bias_nchwxx", lambda rng: [f32(1, 1, 6, 6, 8)(rng),
                                            f32(2, 1, 3, 3, 8, 8)(rng),
                                            f32(1, 2, 1, 1, 8)(rng)],
           {"padding": (1, 1), "nonline": "RELU"},
           ref=_conv_nchwxx_ref("dense", 8, bias=True, relu=True), tag="dense-relu-nchw88"),
    Sample("pool2d_nchwxx", lambda rng: [f32(1, 2, 6, 6, 4)(rng)],
           {"mode": "max", "kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)},
           ref=lambda x, **p: _block(_pool_ref(_unblock(x), **p), 4), tag="max-nchw44"),
]
