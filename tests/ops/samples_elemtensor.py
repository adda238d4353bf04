"""Samples for the ops of MegEngine's elemwise/math/tensor functionals added by the
elemtensor work; references are element loops over Python's math module or plain NumPy
written without megtrace."""
from __future__ import annotations

import math

import numpy as np

from .samples import Sample, f32


def _each(fn):
    """Apply a scalar function element by element in float64."""
    def ref(*xs):
        xs = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in xs))
        out = np.array([fn(*vals) for vals in zip(*(x.ravel() for x in xs))], np.float64)
        return out.reshape(xs[0].shape)
    return ref


def _sign(v):
    return int(v > 0) - int(v < 0)


def _i32(*shape, lo=-50, hi=50):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(np.int32)


def _with_specials(rng):
    x = rng.uniform(-2, 2, size=(3, 5)).astype(np.float32)
    x[0, 1], x[1, 2], x[2, 3], x[2, 4] = np.nan, np.inf, -np.inf, 0.0
    return [x]


SAMPLES = [
    Sample("asin", lambda rng: [f32(3, 4, lo=-0.99, hi=0.99)(rng)], ref=_each(math.asin)),
    Sample("acos", lambda rng: [f32(3, 4, lo=-0.99, hi=0.99)(rng)], ref=_each(math.acos)),
    Sample("tan", lambda rng: [f32(3, 4, lo=-1.4, hi=1.4)(rng)], ref=_each(math.tan)),
    Sample("sinh", lambda rng: [f32(3, 4, lo=-3, hi=3)(rng)], ref=_each(math.sinh)),
    Sample("cosh", lambda rng: [f32(3, 4, lo=-3, hi=3)(rng)], ref=_each(math.cosh)),
    Sample("asinh", lambda rng: [f32(3, 4, lo=-5, hi=5)(rng)], ref=_each(math.asinh)),
    Sample("acosh", lambda rng: [f32(3, 4, lo=1, hi=5)(rng)], ref=_each(math.acosh)),
    Sample("atanh", lambda rng: [f32(3, 4, lo=-0.95, hi=0.95)(rng)], ref=_each(math.atanh)),
    Sample("sign", lambda rng: [np.array([[-2.5, 0.0, 3.0], [1e-3, -1e-3, 0.0]], np.float32)],
           ref=_each(_sign), tag="float"),
    Sample("sign", lambda rng: [_i32(4, 5)(rng)],
           ref=lambda x: np.array([_sign(int(v)) for v in x.ravel()], np.int32).reshape(x.shape),
           tag="int32"),
    Sample("atan2", lambda rng: [f32(3, 4, lo=-2, hi=2)(rng), f32(4, lo=-2, hi=2)(rng)],
           ref=_each(math.atan2)),
    Sample("logaddexp", lambda rng: [f32(3, 4, lo=-80, hi=80)(rng), f32(3, 4, lo=-80, hi=80)(rng)],
           ref=_each(lambda a, b: max(a, b) + math.log1p(math.exp(-abs(a - b))))),
    Sample("left_shift", lambda rng: [_i32(3, 4)(rng), _i32(3, 4, lo=0, hi=8)(rng)],
           ref=lambda a, b: np.array([int(x) * 2 ** int(s) for x, s in zip(a.ravel(), b.ravel())],
                                     np.int32).reshape(a.shape)),
    Sample("right_shift", lambda rng: [_i32(3, 4)(rng), _i32(3, 4, lo=0, hi=8)(rng)],
           ref=lambda a, b: np.array([int(x) // 2 ** int(s) for x, s in zip(a.ravel(), b.ravel())],
                                     np.int32).reshape(a.shape)),
    Sample("isnan", _with_specials,
           ref=lambda x: np.array([v != v for v in x.ravel()]).reshape(x.shape)),
    Sample("isinf", _with_specials,
           ref=lambda x: np.array([abs(v) == math.inf for v in x.ravel()]).reshape(x.shape)),
]

BAD = [
    ("left_shift", [(2, 3), (2, 3)], {}, "DTypeError", "integer"),
    ("atan2", [(2, 3), (4, 3)], {}, "ShapeError", "cannot broadcast"),
]
