"""Samples for the shape-expression ops (megtrace/ops/shape_exprs.py) and for reshape /
broadcast_to given their shape as a run-time input (OpDef.shape_input)."""
import numpy as np

from .samples import Sample, f32


def _i32(*values):
    return lambda rng: np.array(values, np.int32)


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
]

BAD = [
    ("make_shape", [(2,)], {}, "DTypeError", "int32"),
    ("reshape", [(2, 3), (2,)], {"shape": (3, 2)}, "ShapeError", "shape input"),
    ("broadcast_to", [(3,), (3,)], {"shape": (2, 3)}, "ShapeError", "shape input"),
]
