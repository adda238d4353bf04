"""Samples for the shape-expression ops (megtrace/ops/shape_exprs.py), for reshape /
broadcast_to given their shape as a run-time input (OpDef.shape_input) and for subtensor
and set_subtensor (and the slices of the vector-indexing ops) given their bounds as
run-time inputs (OpDef.int_inputs)."""
import numpy as np

from .samples import Sample, f32


def _i32(*values):
    return lambda rng: np.array(values, np.int32)


def _set_rows(x, v):
    out = np.array(x)
    for r in range(1, 4):
        for j, c in enumerate((1, 3)):
            out[r, c] = v[r - 1, j]
    return out


SAMPLES = [
    Sample("shape_of", lambda rng: [f32(2, 3, 4)(rng)],
           ref=lambda x: np.array([2, 3, 4], np.int32)),
    Sample("make_shape", lambda rng: [np.array(5, np.int32), np.array([3, -1], np.int32)],
           ref=lambda a, b: np.array([5, 3, -1], np.int32)),
    Sample("make_shape", lambda rng: [np.array(7, np.int32)],
           ref=lambda a: np.array([7], np.int32), tag="one-part"),
    Sample("reshape", lambda rng: [f32(2, 3, 4)(rng), _i32(2, -1)(rng)], {"shape": (2, -1)},
           ref=lambda x, t, shape: x.reshape(2, 12), tag="shape-input"),
    Sample("broadcast_to", lambda rng: [f32(3, 1)(rng), _i32(2, 3, 4)(rng)],
           {"shape": (2, 3, 4)}, ref=lambda x, t, shape: x[None] * np.ones((2, 3, 4)),
           tag="shape-input"),
    Sample("subtensor", lambda rng: [f32(4, 6)(rng), _i32(1)(rng)[0], _i32(5)(rng)[0]],
           {"index": ((1, 1, 5, None, None),)}, ref=lambda x, b, e, index: x[:, 1:5],
           tag="bound-inputs"),
    Sample("subtensor", lambda rng: [f32(4, 6)(rng), _i32(5)(rng)[0], _i32(2)(rng)[0],
                                     _i32(2)(rng)[0]],
           {"index": ((1, None, 5, 2, None), (0, None, None, None, 2))},
           ref=lambda x, e, s, i, index: x[2, :5:2], tag="bound-inputs-idx"),
    Sample("indexing_multi_axis_vec", lambda rng: [f32(4, 5)(rng), _i32(0, 2, 4)(rng),
                                                   _i32(3)(rng)[0]],
           {"slices": ((0, None, 3, None),), "axes": (1,)},
           ref=lambda x, i, e, slices, axes: x[:3][:, [0, 2, 4]], tag="bound-inputs"),
    Sample("indexing_set_multi_axis_vec", lambda rng: [f32(4, 5)(rng), f32(3, 2)(rng),
                                                       _i32(1, 3)(rng), _i32(1)(rng)[0]],
           {"slices": ((0, 1, None, None),), "axes": (1,)},
           ref=lambda x, v, i, b, slices, axes: _set_rows(x, v), tag="bound-inputs"),
    Sample("set_subtensor", lambda rng: [f32(4, 6)(rng), f32(3, 6)(rng), _i32(3)(rng)[0]],
           {"index": ((0, None, 3, None, None),)},
           ref=lambda x, v, e, index: np.concatenate([v, x[3:]]), tag="bound-inputs"),
]

BAD = [
    ("make_shape", [(2,)], {}, "DTypeError", "int32"),
    ("reshape", [(2, 3), (2,)], {"shape": (3, 2)}, "ShapeError", "shape input"),
    ("broadcast_to", [(3,), (3,)], {"shape": (2, 3)}, "ShapeError", "shape input"),
    ("subtensor", [(2, 3), (1,)], {"index": ((1, 0, 2, None, None),)}, "ShapeError",
     "run-time bounds"),
    ("set_subtensor", [(2, 3), (2, 2), (1,)], {"index": ((1, None, 2, None, None),)},
     "ShapeError", "run-time bounds"),
    ("indexing_multi_axis_vec", [(4, 5), (2,), (1,)], {"slices": ((0, None, 3, None),),
                                                       "axes": (1,)}, "ShapeError",
     "run-time bounds"),
]
