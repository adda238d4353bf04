"""Packed dense weights in transparent huge pages (relay_bridge/cpu/huge_pages.py)."""
from __future__ import annotations

import numpy as np

from megtrace.relay_bridge.cpu import huge_pages


def test_large_weights_are_copied_exactly_small_ones_pass_through(rng):
    small = rng.standard_normal((64, 64)).astype(np.float32)
    filler = huge_pages.Filler()
    assert filler.constant(small) is small
    big = rng.standard_normal((3, 768, 320)).astype(np.float32)      # 2.8 MB
    got = filler.constant(big)
    filler.wait()
    if not huge_pages._available():
        assert got is big
        return
    data = got.numpy()
    assert data.shape == big.shape and data.dtype == big.dtype
    assert np.array_equal(data, big)
    big[0, 0, 0] += 1.0                        # a copy, not a view of the caller's array
    assert data[0, 0, 0] != big[0, 0, 0]


def test_a_filler_copies_on_a_worker_and_wait_completes_every_copy(rng):
    """The lowering's Filler: large weights come back as Tensors whose contents (after
    wait) are the arrays', each array copied; small ones pass through."""
    small = rng.standard_normal((64, 64)).astype(np.float32)
    bigs = [rng.standard_normal((n, 768, 320)).astype(np.float32) for n in (3, 4, 5)]
    filler = huge_pages.Filler()
    assert filler.constant(small) is small
    got = [filler.constant(b) for b in bigs]
    filler.wait()
    if not huge_pages._available():
        assert all(g is b for g, b in zip(got, bigs))
        return
    for tensor, big in zip(got, bigs):
        data = tensor.numpy()
        assert np.array_equal(data, big)
        big[0, 0, 0] += 1.0
        assert data[0, 0, 0] != big[0, 0, 0]
    filler.wait()                              # again: nothing pending, no worker


def test_a_model_with_a_large_dense_weight_matches_numpy(rng):
    from megtrace.ir import Graph, TensorType
    from megtrace.ops import get
    from megtrace.relay_bridge import compile_graph
    a = rng.standard_normal((4, 768)).astype(np.float32)
    w = rng.standard_normal((1024, 768)).astype(np.float32)          # 3 MB packed
    g = Graph()
    x = g.add_input(TensorType.of(a), "x")
    y = g.add_node(get("matmul"), [x, g.add_const(w)], {"transpose_b": True})[0]
    g.set_outputs([y], ["y"])
    cg = compile_graph(g)
    assert cg.rules == ["dense"]
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    assert np.abs(cg(a)[0] - want).max() <= 1e-5 * np.abs(want).max()


def test_large_conv_weights_direct_and_winograd_match_numpy(rng, monkeypatch):
    """Conv weights >= 2 MB (packed for the direct rule, transformed for Winograd) live
    in huge pages too; both rules still compute the convolution."""
    from megtrace.ir import Graph, TensorType
    from megtrace.ops import get
    from megtrace.relay_bridge import compile_graph
    from megtrace.relay_bridge.cpu import winograd
    c = 256                                  # 3x3 weight 2.4 MB; Winograd's 9.4 MB
    x = rng.standard_normal((1, c, 5, 5)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    eye = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,oc->nohw", xp[:, :, a:a + 5, b:b + 5], w[:, :, a, b])
               for a in range(3) for b in range(3))
    for mode, rule in (("all", "winograd"), ("0", "conv")):
        monkeypatch.setenv(winograd.ENV, mode)
        g = Graph()
        xv = g.add_input(TensorType.of(x), "x")
        y0 = g.add_node(get("conv2d"), [xv, g.add_const(eye)], {})[0]   # blocked input
        y = g.add_node(get("conv2d"), [y0, g.add_const(w)], {"padding": (1, 1)})[0]
        g.set_outputs([y], ["y"])
        cg = compile_graph(g, rules=True)
        assert cg.rules == ["conv", rule]
        assert np.abs(cg(x)[0] - want).max() <= 1e-4 * np.abs(want).max()
