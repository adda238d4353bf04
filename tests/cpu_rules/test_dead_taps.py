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


@pytest.mark.parametrize("xs, ws, padding, convs", [
    ((8, 64, 2, 2), (64, 64, 3, 3), 1, [(2, 2)] * 4),     # ResNet's 2x2 stage: 4 of 9 taps each
    ((8, 64, 1, 2), (80, 64, 3, 3), 1, [(1, 2)] * 2),     # a 1x2 map: rows cropped, columns split
    ((8, 64, 2, 2), (64, 64, 5, 5), 2, [(2, 2)] * 4),     # 5x5 pad 2: 4 of 25 taps each
    ((4, 64, 2, 2), (64, 64, 3, 3), 1, [(3, 3)]),         # batch too small to stack images
    ((8, 64, 3, 3), (64, 64, 3, 3), 1, [(3, 3)]),         # 3x3 map: kept
])
def test_small_map_positions_take_their_own_taps(xs, ws, padding, convs, rng):
    """A stride-1 conv on a map of at most 2x2 outputs is one conv per output position
    over the taps that position meets (dead_taps.split_positions), concatenated back."""
    from megtrace.relay_bridge.cpu.dead_taps import split_positions
    x = rng.standard_normal(xs).astype("float32")
    w = rng.standard_normal(ws).astype("float32")
    fn, got = _conv_graph(x, w, 1, padding)
    want = F.conv2d(mge.tensor(x), mge.tensor(w), padding=padding).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    built = split_positions(crop_dead_taps(fn.graph))
    assert [tuple(n.inputs[1].type.shape[-2:]) for n in built.nodes
            if n.op.name == "conv2d"] == convs


def test_positions_read_one_packed_weight(rng):
    """The four position convs of a 2x2 map read the whole runtime weight, packed once,
    at their tap offsets (lower._tap_window): one weight packing, no window copies;
    a lone dead-tap crop's window (the centre tap) is still packed alone."""
    from megtrace.relay_bridge import compile_graph
    x = rng.standard_normal((8, 64, 2, 2)).astype("float32")
    w = rng.standard_normal((64, 64, 3, 3)).astype("float32")
    fn, got = _conv_graph(x, w, 1, 1)
    cg = compile_graph(fn.graph)
    assert cg.rules == ["conv"] * 4
    assert [k for k in cg.kernels if "pack_weight" in k] == ["pack_weight"]
    assert not any("strided_slice" in k for k in cg.kernels)
    want = F.conv2d(mge.tensor(x), mge.tensor(w), padding=1).numpy()
    np.testing.assert_allclose(cg(x, w)[0], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    fn, _ = _conv_graph(rng.standard_normal((2, 16, 1, 1)).astype("float32"),
                        rng.standard_normal((32, 16, 3, 3)).astype("float32"), 1, 1)
    assert any("strided_slice" in k and "pack_weight" in k
               for k in compile_graph(fn.graph).kernels)
