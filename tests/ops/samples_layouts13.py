"""Samples of the blocked AdaptivePooling / Resize enable_nchw88 / enable_nchw44 write
(megtrace/ops/nchwxx.py): the references unblock with MegEngine's index formula
x[n, cb, h, w, i] = X[n, cb*p + i, h, w] and compute on the NCHW tensor with NumPy alone.
Sizes halve exactly, so adaptive pooling is a 2x2 block reduction and half-pixel bilinear
resize the 2x2 block mean."""
from __future__ import annotations

import numpy as np

from .samples import Sample, f32


def _unblock(x):
    n, cb, h, w, p = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, cb * p, h, w)


def _block(y, p):
    n, c, h, w = y.shape
    return y.reshape(n, c // p, p, h, w).transpose(0, 1, 3, 4, 2)


def _halved(reduce):
    def ref(x, **_):
        y = _unblock(x.astype(np.float64))
        n, c, h, w = y.shape
        return _block(reduce(y.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5)), x.shape[4])
    return ref


SAMPLES = [
    Sample("adaptive_pool2d_nchwxx", lambda rng: [f32(1, 2, 8, 6, 8)(rng)],
           {"mode": "average", "out": (4, 3)}, ref=_halved(np.mean), tag="average-nchw88"),
    Sample("adaptive_pool2d_nchwxx", lambda rng: [f32(2, 3, 4, 4, 4)(rng)],
           {"mode": "max", "out": (2, 2)}, ref=_halved(np.max), tag="max-nchw44"),
    Sample("resize_nchwxx", lambda rng: [f32(1, 2, 8, 8, 4)(rng)],
           {"size": (4, 4), "mode": "linear"}, ref=_halved(np.mean), tag="linear-nchw44"),
]

BAD = [
    ("adaptive_pool2d_nchwxx", [(1, 16, 8, 8)], {"out": (2, 2)}, "ShapeError", "C/p"),
    ("resize_nchwxx", [(1, 2, 8, 8, 3)], {"size": (4, 4)}, "ShapeError", "p 8 or 4"),
]
