"""Ops without a Relax lowering (roi_pooling, deformable_psroi_pooling, deformable_conv2d,
nms_keep) inside a trace: the compiled call runs the graph on the NumPy interpreter and
gives the eager results (MegEngine traces them like any other op)."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _inputs(rng):
    x = rng.random((1, 4, 8, 8), dtype=np.float32)
    rois = np.array([[0, 1, 1, 5, 5], [0, 0, 0, 7, 3]], np.float32)
    return x, rois


CASES = {
    "roi_pooling": lambda x, r: F.vision.roi_pooling(x, r, (2, 2), "max", 1.0) * 2,
    "roi_pooling_avg": lambda x, r: F.vision.roi_pooling(x, r, (3, 2), "average", 0.5) + 1,
    "deformable_psroi_pooling": lambda x, r: F.vision.deformable_psroi_pooling(
        x, r, F.zeros((2, 2, 2, 2)), True, 2, 2, 2, 1.0, 1.0) * 3,
    "nms": lambda x, r: F.vision.nms(r[:, 1:], F.flatten(x)[:2], 0.5, max_output=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("symbolic", [False, True])
def test_unlowered_op_in_a_compiled_trace_matches_eager(name, symbolic, rng):
    fn = CASES[name]
    x, rois = _inputs(rng)
    traced = trace(symbolic=symbolic)(fn)
    for _ in range(3):          # record, then the compiled (interpreted) replays
        x = rng.random(x.shape, dtype=np.float32)
        want = fn(mge.tensor(x), mge.tensor(rois)).numpy()
        got = traced(mge.tensor(x), mge.tensor(rois)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_deformable_conv2d_in_a_compiled_trace_matches_eager(rng):
    x = rng.random((1, 4, 8, 8), dtype=np.float32)
    w = rng.random((3, 4, 3, 3), dtype=np.float32)
    offset = rng.random((1, 18, 6, 6), dtype=np.float32)
    mask = rng.random((1, 9, 6, 6), dtype=np.float32)
    traced = trace(symbolic=True)(lambda *a: F.deformable_conv2d(*a) + 1)
    for _ in range(3):
        want = F.deformable_conv2d(*map(mge.tensor, (x, w, offset, mask))).numpy() + 1
        got = traced(*map(mge.tensor, (x, w, offset, mask))).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        offset = rng.random(offset.shape, dtype=np.float32)
