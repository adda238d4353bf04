"""Samples for general_norm and lrn (MegEngine 1.13's GeneralNorm and LRN oprs). References
loop over the normalized groups / channel windows in float64."""
from __future__ import annotations

import itertools

import numpy as np

from .samples import Sample, f32


def _general_norm_ref(x, w, b, *, eps, axis_start, axis_end):
    x = x.astype(np.float64)
    out = np.empty_like(x)
    lead, tail = x.shape[:axis_start], x.shape[axis_end:]
    for i in itertools.product(*map(range, lead)):
        for j in itertools.product(*map(range, tail)):
            sel = i + (slice(None),) * (axis_end - axis_start) + j
            v = x[sel]
            out[sel] = (v - v.mean()) / np.sqrt(((v - v.mean()) ** 2).mean() + eps) * w + b
    return out


def _lrn_ref(x, *, n, k, alpha, beta):
    x = x.astype(np.float64)
    out = np.empty_like(x)
    c = x.shape[1]
    for ch in range(c):
        lo, hi = max(ch - n // 2, 0), min(ch + n // 2, c - 1)
        s = sum(x[:, j] ** 2 for j in range(lo, hi + 1))
        out[:, ch] = x[:, ch] / (k + alpha * s) ** beta
    return out


SAMPLES = [
    Sample("general_norm", lambda rng: [f32(2, 3, 4, 5)(rng), f32(3, 4)(rng), f32(3, 4)(rng)],
           {"eps": 1e-5, "axis_start": 1, "axis_end": 3}, ref=_general_norm_ref, tag="middle"),
    Sample("general_norm", lambda rng: [f32(4, 3, 2)(rng), f32(4)(rng), f32(4)(rng)],
           {"eps": 1e-2, "axis_start": 0, "axis_end": 1}, ref=_general_norm_ref, tag="first"),
    Sample("lrn", lambda rng: [f32(2, 7, 3, 4, lo=-3, hi=3)(rng)],
           {"n": 3, "k": 1.0, "alpha": 0.1, "beta": 0.75}, ref=_lrn_ref),
    Sample("lrn", lambda rng: [f32(1, 4, 2, 3, lo=-3, hi=3)(rng)],
           {"n": 5, "k": 2.0, "alpha": 0.2, "beta": 0.5}, ref=_lrn_ref, tag="window-wider"),
]

BAD = [
    ("general_norm", [(2, 3, 4), (4,), (4,)], {"axis_start": 1, "axis_end": 2}, "ShapeError",
     "weight"),
    ("general_norm", [(2, 3), (3,), (3,)], {"axis_start": 1, "axis_end": 3}, "ShapeError",
     "cannot normalize"),
    ("lrn", [(2, 3, 4)], {}, "ShapeError", "4-d"),
    ("lrn", [(2, 3, 4, 4)], {"n": 4}, "ShapeError", "odd"),
]
