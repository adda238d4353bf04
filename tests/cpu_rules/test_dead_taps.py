"""Convolutions on small maps are built without the taps and outputs that meet only
padding (relay_bridge/cpu/dead_taps.py) and still compute the full convolution: checked
against megtrace's eager NumPy convolution (float64 sums)."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace
from megtrace.relay_bridge.cpu.dead_taps import crop_dead_taps

CASES = [  # x shape, w shape, stride, padding, (kernel, output) spatial after the rewrite
    ((2, 16, 1, 1), (32, 16, 3, 3), 1, 1, ((1, 1), (1, 1))),   # ResNet's last stage, 32x32 in
    ((16, 4, 1, 1), (16, 4, 1, 1), 1, 1, ((1, 1), (1, 1))),    # its weight gradient: 3x3 out
    ((1, 8, 1, 2), (4, 8, 3, 3), 1, 1, ((1, 3), (1, 2))),      # one axis only
    ((1, 3, 2, 2), (5, 3, 3, 3), 2, 1, ((2, 2), (1, 1))),      # stride 2
    ((1, 3, 1, 1), (5, 3, 3, 3), 1, 3, ((3, 3), (3, 3))),      # dead outputs on every side
    ((2, 3, 1, 5), (4, 3, 1, 1), 1, 2, ((1, 1), (1, 5))),      # dead outputs, all taps live
]


def _conv_graph(x, w, stride, padding):
    fn = trace(symbolic=True)(lambda a, b: F.conv2d(a, b, stride=stride, padding=padding))
    got = fn(mge.tensor(x), mge.tensor(w)).numpy()
    return fn, got


@pytest.mark.parametrize("xs, ws, stride, padding, live", CASES)
def test_cropped_conv_matches_the_full_one(xs, ws, stride, padding, live, rng):
    x = rng.standard_normal(xs).astype("float32")
    w = rng.standard_normal(ws).astype("float32")
    fn, got = _conv_graph(x, w, stride, padding)
    want = F.conv2d(mge.tensor(x), mge.tensor(w), stride=stride, padding=padding).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    convs = [n for n in crop_dead_taps(fn.graph).nodes if n.op.name == "conv2d"]
    assert len(convs) == 1
    kernel, out = live
    assert tuple(convs[0].inputs[1].type.shape[-2:]) == kernel
    assert tuple(convs[0].outputs[0].type.shape[2:]) == out


def test_conv_without_dead_work_is_kept(rng):
    x = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    w = rng.standard_normal((4, 4, 3, 3)).astype("float32")
    fn, _ = _conv_graph(x, w, 1, 1)
    graph = fn.graph
    assert crop_dead_taps(graph) is graph
