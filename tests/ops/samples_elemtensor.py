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


# -- sorting, dot, matinv ----------------------------------------------------------------
def _sorted_rows(x, descending):
    rows = [sorted(range(len(r)), key=lambda i: (-r[i], i) if descending else (r[i], i))
            for r in x.tolist()]
    idx = np.array(rows, np.int32)
    return np.array([[r[i] for i in o] for r, o in zip(x.tolist(), rows)], x.dtype), idx


def _kth(x, k, descending):
    return np.array([sorted(r, reverse=descending)[k - 1] for r in x.tolist()], x.dtype)


def _inverse(m):
    """Gauss-Jordan elimination with partial pivoting, in float64."""
    a = [list(map(float, row)) + [float(i == j) for j in range(len(row))]
         for i, row in enumerate(m)]
    n = len(a)
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(a[r][c]))
        a[c], a[p] = a[p], a[c]
        a[c] = [v / a[c][c] for v in a[c]]
        for r in range(n):
            if r != c:
                a[r] = [v - a[r][c] * w for v, w in zip(a[r], a[c])]
    return np.array([row[n:] for row in a])


def _well_conditioned(*shape):
    def make(rng):
        x = rng.uniform(-1, 1, size=shape) + 3 * np.eye(shape[-1])
        return [x.astype(np.float32)]
    return make


SAMPLES += [
    Sample("argsort", lambda rng: [f32(3, 6)(rng)], {"descending": False},
           ref=lambda x, descending: _sorted_rows(x, descending), tag="ascending"),
    Sample("argsort", lambda rng: [f32(4, 5)(rng)], {"descending": True},
           ref=lambda x, descending: _sorted_rows(x, descending), tag="descending"),
    Sample("kth_value", lambda rng: [f32(3, 7)(rng)], {"k": 3, "descending": False},
           ref=lambda x, **p: _kth(x, **p), tag="ascending"),
    Sample("kth_value", lambda rng: [_i32(4, 6)(rng)], {"k": 2, "descending": True},
           ref=lambda x, **p: _kth(x, **p), tag="descending-int"),
    Sample("dot", lambda rng: [f32(7)(rng), f32(7)(rng)],
           ref=lambda a, b: np.array(math.fsum(float(u) * float(v) for u, v in zip(a, b)))),
    Sample("matinv", _well_conditioned(4, 4), ref=_inverse, tag="2d"),
    Sample("matinv", _well_conditioned(2, 3, 3),
           ref=lambda x: np.stack([_inverse(m) for m in x]), tag="batched"),
]


# -- diag, gather, scatter, copy -----------------------------------------------------------
def _diag_ref(x, k):
    if x.ndim == 1:
        n = len(x) + abs(k)
        out = np.zeros((n, n), x.dtype)
        for i, v in enumerate(x):
            out[i + max(-k, 0), i + max(k, 0)] = v
        return out
    return np.array([x[i, i + k] for i in range(x.shape[0]) if 0 <= i + k < x.shape[1]],
                    x.dtype)


def _gather_ref(x, index, axis):
    out = np.zeros(index.shape, x.dtype)
    for pos in np.ndindex(*index.shape):
        src = list(pos)
        src[axis] = index[pos]
        out[pos] = x[tuple(src)]
    return out


def _scatter_ref(x, index, source, axis):
    out = x.copy()
    for pos in np.ndindex(*index.shape):
        dst = list(pos)
        dst[axis] = index[pos]
        out[tuple(dst)] = source[pos]
    return out


def _distinct_rows(rows, cols, size):
    """An index whose columns hold distinct values (scatter targets never collide)."""
    def make(rng):
        return np.stack([rng.permutation(size)[:rows] for _ in range(cols)], 1).astype(np.int32)
    return make


SAMPLES += [
    Sample("diag", lambda rng: [f32(4)(rng)], {"k": 1}, ref=_diag_ref, tag="vector-up"),
    Sample("diag", lambda rng: [f32(3)(rng)], {"k": -2}, ref=_diag_ref, tag="vector-down"),
    Sample("diag", lambda rng: [f32(4, 6)(rng)], {"k": 2}, ref=_diag_ref, tag="matrix-up"),
    Sample("diag", lambda rng: [f32(5, 3)(rng)], {"k": -1}, ref=_diag_ref, tag="matrix-down"),
    Sample("gather", lambda rng: [f32(3, 4)(rng), _i32(3, 2, lo=0, hi=4)(rng)], {"axis": 1},
           ref=_gather_ref, tag="axis1"),
    Sample("gather", lambda rng: [f32(5, 4, 3)(rng), _i32(2, 3, 3, lo=0, hi=5)(rng)],
           {"axis": 0}, ref=_gather_ref, tag="axis0-smaller"),
    Sample("scatter", lambda rng: [f32(4, 5)(rng), _distinct_rows(2, 5, 4)(rng), f32(2, 5)(rng)],
           {"axis": 0}, ref=_scatter_ref, tag="axis0"),
    Sample("scatter", lambda rng: [f32(3, 6)(rng), _distinct_rows(4, 3, 6)(rng).T.copy(),
                                   f32(3, 4)(rng)],
           {"axis": 1}, ref=_scatter_ref, tag="axis1"),
    Sample("copy", lambda rng: [f32(2, 3)(rng)], ref=lambda x: np.array(x.tolist(), x.dtype)),
]

BAD += [
    ("argsort", [(2, 3, 4)], {}, "ShapeError", "2-d"),
    ("dot", [(3,), (4,)], {}, "ShapeError", "vectors"),
    ("matinv", [(2, 3)], {}, "ShapeError", "square"),
    ("diag", [(2, 3, 4)], {}, "ShapeError", "1-d or 2-d"),
    ("gather", [(2, 3), (3,)], {}, "DTypeError", "integer"),
]



def _svd_ref(x, full_matrices):
    """LAPACK's SVD in float64 (singular vectors are unique only up to sign, so the sample
    compares with the same factorisation; test_svd_reconstructs checks the algebra)."""
    u, s, vh = np.linalg.svd(x.astype(np.float64), full_matrices=full_matrices)
    return u, s, vh


SAMPLES += [
    Sample("svd", lambda rng: [f32(2, 4, 3)(rng)], {"full_matrices": False}, ref=_svd_ref,
           tag="reduced"),
    Sample("svd", lambda rng: [f32(3, 5)(rng)], {"full_matrices": True}, ref=_svd_ref,
           tag="full"),
]


# -- NaN in arg-reductions: MegEngine (like NumPy) points at the first NaN -------------
def _with_nans(*shape):
    def make(rng):
        x = rng.uniform(-1, 1, size=shape).astype(np.float32)
        x.reshape(-1)[[1, 7]] = np.nan
        return [x]
    return make


def _first_nan_or_arg(x, axis, pick):
    moved = np.moveaxis(x, axis, -1)
    def one(r):
        nans = [i for i, v in enumerate(r) if v != v]
        return nans[0] if nans else r.tolist().index(pick(r))
    return np.array([[one(r) for r in plane] for plane in moved], np.int32)


SAMPLES += [
    Sample("arg_reduce", _with_nans(2, 3, 4), {"mode": "max", "axis": 2},
           ref=lambda x, **p: _first_nan_or_arg(x, 2, max), tag="argmax-nan"),
    Sample("arg_reduce", _with_nans(2, 3, 4), {"mode": "min", "axis": 1},
           ref=lambda x, **p: _first_nan_or_arg(x, 1, min), tag="argmin-nan"),
]
