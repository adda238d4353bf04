"""The CPU rules make each distinct kernel once per graph: convolutions of one shape and
epilogue structure (different weights, biases and scales) share a scheduled PrimFunc,
and the results are still each layer's own (against a float64 NumPy reference)."""
import numpy as np

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.cpu import lower as cpu_lower


class Repeated(M.Module):
    """Five 3x3 convs of one shape: the first reads NCHW, the next two read NCHW16c
    with bias + ReLU (one kernel), then a residual add, then a scale."""

    def __init__(self):
        super().__init__()
        self.convs = [M.Conv2d(16, 16, 3, padding=1) for _ in range(5)]

    def forward(self, x):
        a = F.relu(self.convs[0](x))
        b = F.relu(self.convs[2](F.relu(self.convs[1](a))))
        c = self.convs[3](b) + a
        return self.convs[4](c) * 0.5


def _conv_ref(x, w, b):
    x, w = x.astype(np.float64), w.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:])
    for i in range(3):
        for j in range(3):
            patch = xp[:, :, i:i + x.shape[2], j:j + x.shape[3]]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b.astype(np.float64).reshape(1, -1, 1, 1)


def test_convolutions_of_one_shape_share_a_kernel(rng, monkeypatch):
    net = Repeated().eval()
    for conv in net.convs:
        conv.bias = mge.tensor(rng.standard_normal((1, 16, 1, 1)).astype(np.float32))
    x = rng.standard_normal((1, 16, 12, 12)).astype(np.float32)
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True, record_only=True)
    f(mge.tensor(x))
    made = []
    real = cpu_lower.conv2d_nchwc
    monkeypatch.setattr(cpu_lower, "conv2d_nchwc",
                        lambda shape, epilogue=None: made.append(shape) or real(shape, epilogue))
    got = compile_graph(f.graph, cache=False)(x)[0]
    assert len(made) == 4               # convs[1] and convs[2] share one kernel
    w = [c.weight.numpy() for c in net.convs]
    bias = [c.bias.numpy() for c in net.convs]
    a = np.maximum(_conv_ref(x, w[0], bias[0]), 0)
    b = np.maximum(_conv_ref(np.maximum(_conv_ref(a, w[1], bias[1]), 0), w[2], bias[2]), 0)
    c = _conv_ref(b, w[3], bias[3]) + a
    want = _conv_ref(c, w[4], bias[4]) * 0.5
    assert np.abs(got - want).max() / np.abs(want).max() <= 1e-5
