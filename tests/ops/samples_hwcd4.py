"""Samples of the NHWCD4 ops enable_hwcd4 writes (megtrace/ops/nhwcd4.py): the references
undo MegEngine's layouts by its index formulas, x[n, h, cb, w, i] = X[n, cb*4 + i, h, w],
dense w[ob, r, s, ic, oi] = W[ob*4 + oi, ic, r, s], grouped w[g, ob, r, s, ic, oi] =
W[g, ob*4 + oi, ic, r, s], depthwise w[gb, 0, r, s, i] = W[gb*4 + i, 0, 0, r, s], and
compute on the NCHW tensors with NumPy alone."""
from __future__ import annotations

import numpy as np

from .samples import Sample, _pool_ref, f32
from .samples import _conv_ref as _conv_nchw


def _nchw(x):
    n, h, cb, w, p = x.shape
    return x.transpose(0, 2, 4, 1, 3).reshape(n, cb * p, h, w)


def _cd4(y):
    n, c, h, w = y.shape
    return y.reshape(n, c // 4, 4, h, w).transpose(0, 3, 1, 4, 2)


def _weight(w, sparse):
    if w.ndim == 6:                              # (G, OCg/4, FH, FW, ICg, 4)
        g, ob, fh, fw, ic, p = w.shape
        return w.transpose(0, 1, 5, 4, 2, 3).reshape(g, ob * p, ic, fh, fw)
    if sparse == "DENSE":                        # (OC/4, FH, FW, IC, 4)
        ob, fh, fw, ic, p = w.shape
        return w.transpose(0, 4, 3, 1, 2).reshape(ob * p, ic, fh, fw)
    gb, _, fh, fw, p = w.shape                   # (G/4, 1, FH, FW, 4)
    return w.transpose(0, 4, 1, 2, 3).reshape(gb * p, 1, 1, fh, fw)


def _conv_cd4_ref(bias=False, relu=False):
    def ref(x, w, *rest, **params):
        y = _conv_nchw(_nchw(x), _weight(w, params.get("sparse", "DENSE")),
                       params.get("stride", (1, 1)), params.get("padding", (0, 0)), (1, 1))
        if bias:
            y = y + _nchw(rest[0].astype(np.float64))
        return _cd4(np.maximum(y, 0) if relu else y)
    return ref


def _relayout_in(x, **_):
    n, c, h, w = x.shape
    padded = np.zeros((n, (c + 3) // 4 * 4, h, w), x.dtype)
    padded[:, :c] = x
    return _cd4(padded)


SAMPLES = [
    Sample("relayout_format", lambda rng: [f32(2, 3, 4, 5)(rng)], {"mode": "NCHW_NHWCD4I"},
           ref=_relayout_in, tag="in-padded"),
    Sample("relayout_format", lambda rng: [f32(1, 4, 2, 5, 4)(rng)], {"mode": "NHWCD4I_NCHW"},
           ref=lambda x, **_: _nchw(x), tag="out"),
    Sample("conv2d_nhwcd4", lambda rng: [f32(1, 7, 1, 7, 4)(rng), f32(2, 3, 3, 4, 4)(rng)],
           {"padding": (1, 1), "stride": (2, 2)}, ref=_conv_cd4_ref(), tag="dense"),
    Sample("conv2d_nhwcd4", lambda rng: [f32(1, 6, 2, 6, 4)(rng), f32(2, 1, 3, 3, 4)(rng)],
           {"padding": (1, 1), "sparse": "GROUP"}, ref=_conv_cd4_ref(), tag="channel"),
    Sample("conv2d_nhwcd4", lambda rng: [f32(1, 5, 2, 5, 4)(rng), f32(2, 1, 3, 3, 4, 4)(rng)],
           {"sparse": "GROUP"}, ref=_conv_cd4_ref(), tag="group"),
    Sample("conv_bias_nhwcd4", lambda rng: [f32(1, 6, 1, 6, 4)(rng), f32(2, 3, 3, 4, 4)(rng),
                                            f32(1, 1, 2, 1, 4)(rng)],
           {"padding": (1, 1), "nonline": "RELU"}, ref=_conv_cd4_ref(bias=True, relu=True),
           tag="dense-relu"),
    Sample("pool2d_nhwcd4", lambda rng: [f32(1, 6, 2, 6, 4)(rng)],
           {"mode": "max", "kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)},
           ref=lambda x, **p: _cd4(_pool_ref(_nchw(x), **p)), tag="max"),
]
