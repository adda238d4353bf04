"""Samples at batch 1 for writers that compute shapes in the file (tests/ops/
test_ops_dump.py runs them at batch 2 too): a length-1 Linspace in gather's index grid,
a deconvolution whose output shape is computed from the input's."""
import numpy as np

from .samples import Sample, f32
from .samples_module import _conv_transpose_ref


def _gather_loops(x, index, axis):
    out = np.empty(index.shape, x.dtype)
    for pos in np.ndindex(*index.shape):
        src = list(pos)
        src[axis] = index[pos]
        out[pos] = x[tuple(src)]
    return out


def _index(*shape, hi):
    return lambda rng: rng.integers(0, hi, size=shape).astype(np.int32)


def _linspace_loops(*_, start, stop, shape):
    n = shape[0]
    step = (float(np.float32(stop)) - float(np.float32(start))) / max(n - 1, 1)
    return np.array([float(np.float32(start)) + i * step for i in range(n)], np.float32)


SAMPLES = [
    Sample("linspace", lambda rng: [], {"start": -1.0, "stop": 2.5, "shape": (6,)},
           ref=_linspace_loops, tag="constant"),
    Sample("linspace", lambda rng: [np.array([4], np.int32)],
           {"start": 0.0, "stop": 3.0, "shape": (4,)}, ref=_linspace_loops, tag="shape-input"),
    Sample("linspace", lambda rng: [], {"start": 2.0, "stop": 5.0, "shape": (1,)},
           ref=_linspace_loops, tag="one"),
    Sample("gather", lambda rng: [f32(1, 4, 3)(rng), _index(1, 2, 3, hi=4)(rng)],
           {"axis": 1}, ref=_gather_loops, tag="batch1-3d"),
    Sample("conv_transpose2d", lambda rng: [f32(1, 2, 3, 3)(rng), f32(2, 3, 2, 2)(rng)],
           {"stride": (2, 2), "padding": (0, 1), "output_padding": (1, 1),
            "dilation": (1, 1)},
           ref=lambda x, w, **p: _conv_transpose_ref(x, w, **p), tag="batch1-output-padding"),
]
