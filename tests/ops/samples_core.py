"""Samples for the tensor-indexing and writing ops (IndexingMultiAxisVec,
IndexingSetMultiAxisVec, SetSubtensor). References loop over output positions, so they
do not use NumPy's advanced indexing that the eager implementations use."""
from __future__ import annotations

import itertools

import numpy as np

from .samples import Sample, f32


def _idx(*shape, lo, hi):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(np.int32)


def _gather_ref(x, *idx, slices, axes):
    """x[slices][idx on axes] by explicit loops: the broadcast index dims replace the
    indexed axes when adjacent, else lead."""
    for axis, start, stop, step in slices:
        x = np.take(x, list(range(*slice(start, stop, step).indices(x.shape[axis]))), axis=axis)
    bshape = np.broadcast_shapes(*[i.shape for i in idx])
    idx = [np.broadcast_to(i, bshape) for i in idx]
    rest = [a for a in range(x.ndim) if a not in axes]
    adjacent = list(axes) == list(range(axes[0], axes[0] + len(axes)))
    at = axes[0] if adjacent else 0
    rest_shape = [x.shape[a] for a in rest]
    out_shape = rest_shape[:at] + list(bshape) + rest_shape[at:]
    out = np.zeros(out_shape, x.dtype)
    for b in itertools.product(*[range(d) for d in bshape]):
        for r in itertools.product(*[range(d) for d in rest_shape]):
            src = [0] * x.ndim
            for a, i in zip(axes, idx):
                src[a] = int(i[b]) % x.shape[a]
            for a, j in zip(rest, r):
                src[a] = j
            out[tuple(r[:at]) + b + tuple(r[at:])] = x[tuple(src)]
    return out


def _scatter_ref(x, v, *idx, slices, axes):
    """x with the positions _gather_ref reads set to v (found by gathering positions)."""
    positions = np.arange(x.size).reshape(x.shape)
    where = _gather_ref(positions, *idx, slices=slices, axes=axes)
    out = x.copy().reshape(-1)
    for p, value in zip(where.reshape(-1), v.reshape(-1)):
        out[p] = value
    return out.reshape(x.shape)


def _set_sub_ref(x, v, index):
    out = x.copy()
    key = [slice(None)] * x.ndim
    for axis, start, stop, step, i in index:
        key[axis] = i if i is not None else slice(start, stop, step)
    out[tuple(key)] = v       # basic (view) indexing only
    return out


SAMPLES = [
    Sample("indexing_multi_axis_vec",
           lambda rng: [f32(3, 4, 5, 2)(rng), _idx(3, lo=-4, hi=4)(rng), _idx(3, lo=0, hi=5)(rng)],
           {"slices": (), "axes": (1, 2)}, ref=_gather_ref, tag="adjacent"),
    Sample("indexing_multi_axis_vec",
           lambda rng: [f32(4, 5, 3)(rng), _idx(2, 1, lo=0, hi=4)(rng), _idx(3, lo=-3, hi=3)(rng)],
           {"slices": (), "axes": (0, 2)}, ref=_gather_ref, tag="apart-broadcast"),
    Sample("indexing_multi_axis_vec",
           lambda rng: [f32(4, 6, 3)(rng), _idx(2, 2, lo=0, hi=3)(rng)],
           {"slices": ((1, 5, 0, -2),), "axes": (2,)}, ref=_gather_ref, tag="slice-2d-index"),
    # distinct positions: a value written twice gets MegEngine's gradient, not the
    # finite difference (tests/autodiff/test_grad_manager.py checks that case)
    Sample("indexing_set_multi_axis_vec",
           lambda rng: [f32(4, 5, 3)(rng), f32(2, 5)(rng), np.array([3, 0], np.int32),
                        np.array([2, -1], np.int32)],
           {"slices": (), "axes": (0, 2)}, ref=_scatter_ref, tag="apart"),
    Sample("indexing_set_multi_axis_vec",
           lambda rng: [f32(3, 6)(rng), f32(3, 2)(rng), np.array([0, 2], np.int32)],
           {"slices": ((0, None, None, -1),), "axes": (1,)}, ref=_scatter_ref, tag="slice"),
    Sample("set_subtensor", lambda rng: [f32(5, 6, 2)(rng), f32(2, 2)(rng)],
           {"index": ((0, 4, 0, -2, None), (1, None, None, None, -3))}, ref=_set_sub_ref),
]

# (op, input shapes (float32), params, error class, words the message must contain)
BAD = [
    ("indexing_multi_axis_vec", [(3, 4), (2,)], {"axes": (1,)}, "DTypeError", "integers"),
    ("indexing_multi_axis_vec", [(3, 4), (2,)], {"axes": (2,)}, "ShapeError", "out of range"),
    ("set_subtensor", [(3, 4), (2,)], {"index": ((0, 0, 3, None, None),)}, "ShapeError",
     "subtensor's shape"),
]
