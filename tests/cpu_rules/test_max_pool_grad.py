"""The max-pool gradient rule (relay_bridge/cpu/pool_grad.py) on a traced backward pass:
the VJP subgraph is found and computed on NCHW16c, with every tied maximum receiving the
window's gradient, against a NumPy loop over the windows."""
from __future__ import annotations

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.autodiff import GradManager
from megtrace.jit import trace
from megtrace.relay_bridge.cpu.pool_grad import find_max_pool_grads


def max_pool_grad_ref(x, g, k, s, p):
    """Each window's gradient added to every element equal to the window's maximum."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    gx = np.zeros(xp.shape, np.float64)
    for q in range(g.shape[2]):
        for r in range(g.shape[3]):
            win = xp[:, :, q * s:q * s + k, r * s:r * s + k]
            hit = win == win.max(axis=(2, 3), keepdims=True)
            gx[:, :, q * s:q * s + k, r * s:r * s + k] += hit * g[:, :, q, r, None, None]
    return gx[:, :, p:p + h, p:p + w]


def _traced_grad(c, k, s, p, relu):
    """trace of x -> d(sum(max_pool(x) * gy))/dx, x passed through an identity 1x1 conv
    (exact) so that it reaches the pool in NCHW16c as a conv output does, and a relu
    whose backward follows the VJP (folded into the rule's kernel), as in ResNet."""
    conv = M.Conv2d(c, c, 1, bias=False)
    conv.weight = mge.Parameter(np.eye(c, dtype="float32").reshape(c, c, 1, 1))

    def step(inp, gy):
        gm = GradManager().attach([inp])
        with gm:
            y = F.max_pool2d(F.relu(conv(inp)) if relu else conv(inp), k, stride=s, padding=p)
            gm.backward((y * gy).sum())
        return inp.grad
    return trace(step, symbolic=True)


@pytest.mark.parametrize("n, c, h, k, s, p, relu", [
    (2, 64, 16, 3, 2, 1, True),      # ResNet-18's stem pool at 32x32 and 64x64 inputs
    (2, 64, 32, 3, 2, 1, True),
    (2, 64, 16, 3, 2, 1, False),     # no relu before the pool
    (1, 24, 9, 3, 2, 1, True),       # odd size, channels not a multiple of 16
    (1, 16, 8, 2, 2, 0, False),      # no padding: no -inf pad node
    (1, 16, 7, 3, 1, 1, True),       # overlapping windows, stride 1
])
def test_max_pool_grad_rule_matches_reference_with_ties(n, c, h, k, s, p, relu, rng):
    step = _traced_grad(c, k, s, p, relu)
    x = rng.integers(-2, 4, (n, c, h, h)).astype("float32")    # many tied maxima
    o = (h + 2 * p - k) // s + 1
    gy = rng.standard_normal((n, c, o, o)).astype("float32")
    got = step(mge.tensor(x), mge.tensor(gy)).numpy()
    graph, compiled = next(iter(step._entries.values())).compiled
    assert "max_pool_grad_nchw16c" in compiled.rules
    assert [m.relu for m in find_max_pool_grads(graph)] == [relu]
    r = (np.maximum(x, 0) if relu else x).astype(np.float64)
    want = max_pool_grad_ref(r, gy.astype(np.float64), k, s, p) * ((r > 0) if relu else 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
