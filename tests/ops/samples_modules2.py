"""Samples for the modules2 ops: cond_take (a value-shaped op) and the rest of the
MegEngine 1.13 surface added with it. References are written with plain loops."""
from __future__ import annotations

import numpy as np

from .samples import Sample


# -- cond_take: values where the mask holds, in row-major order, and their flat indices --
def _with_mask(*shape):
    def make(rng):
        x = rng.uniform(-1, 1, size=shape).astype(np.float32)
        return [x, rng.uniform(size=shape) < 0.5]
    return make


def _cond_take_ref(x, mask):
    values, index = [], []
    for i, (v, m) in enumerate(zip(x.reshape(-1).tolist(), mask.reshape(-1).tolist())):
        if m:
            values.append(v)
            index.append(i)
    return np.array(values, x.dtype), np.array(index, np.int32)


SAMPLES = [
    Sample("cond_take", _with_mask(3, 4, 5), ref=_cond_take_ref, tag="3d"),
    Sample("cond_take", _with_mask(7), ref=_cond_take_ref, tag="1d"),
    Sample("cond_take", lambda rng: [np.float32([[1, 2, 3]]), np.array([[False, False, True]])],
           ref=_cond_take_ref, tag="one-taken"),
    Sample("cond_take", lambda rng: [np.arange(6, dtype=np.int32).reshape(2, 3),
                                     np.ones((2, 3), bool)], ref=_cond_take_ref, tag="int-all"),
]

BAD = [
    ("cond_take", [(2, 3), (2, 3)], {}, "DTypeError", "must be bool"),
]
