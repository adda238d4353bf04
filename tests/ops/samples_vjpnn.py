"""Samples for the ops added for gradients (indexing_incr_multi_axis_vec). References
loop over positions (no NumPy advanced indexing)."""
from __future__ import annotations

import numpy as np

from .samples import Sample, f32
from .samples_core import _gather_ref, _idx


def _incr_ref(x, v, *idx, slices, axes):
    """x plus v at the positions _gather_ref reads, repeats accumulating."""
    positions = np.arange(x.size).reshape(x.shape)
    where = _gather_ref(positions, *idx, slices=slices, axes=axes)
    out = x.astype(np.float64).reshape(-1)
    for p, value in zip(where.reshape(-1), v.reshape(-1)):
        out[p] += value
    return out.reshape(x.shape)


SAMPLES = [
    Sample("indexing_incr_multi_axis_vec",
           lambda rng: [f32(4, 5, 3)(rng), f32(6, 5)(rng), np.array([0, 2, 2, -1, 0, 3],
                                                                    np.int32),
                        np.array([1, 1, 1, 0, 1, 2], np.int32)],
           {"slices": (), "axes": (0, 2)}, ref=_incr_ref, tag="apart-repeats"),
    Sample("indexing_incr_multi_axis_vec",
           lambda rng: [f32(3, 6)(rng), f32(3, 2, 2)(rng), _idx(2, 2, lo=0, hi=6)(rng)],
           {"slices": ((0, None, None, -1),), "axes": (1,)}, ref=_incr_ref, tag="slice"),
]

BAD = [
    ("indexing_incr_multi_axis_vec", [(3, 4), (2,), (2,)], {"axes": (0,)}, "DTypeError",
     "integers"),
]
