"""Repeated computations are built once (relay_bridge/cpu/common_subexpr.py): a strided
convolution's weight gradient transposes the output gradient once per stride phase,
and the merged graph still computes what NumPy does; random ops are never merged."""
import numpy as np

import megtrace as mge
import megtrace.functional as F
from megtrace.autodiff import GradManager
from megtrace.jit import trace
from megtrace.relay_bridge.cpu.common_subexpr import duplicates, merge_common_subexprs


def test_repeated_reductions_are_merged_cheap_shared_values_are_not(rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    y = rng.standard_normal((2, 3, 4, 5)).astype("float32")

    @trace(symbolic=True)
    def f(a, b):
        first = F.sum(a * b + 1.0, axis=1)
        again = F.sum(a * b + 1.0, axis=1)          # the same reduction, merged
        # the same exp twice, each read by another product: left to fuse into both
        return first * again + (F.exp(a) * b - F.exp(a) * a).sum(axis=1)

    got = f(mge.tensor(x), mge.tensor(y)).numpy()
    s, e = (x * y + 1.0).sum(axis=1), (np.exp(x) * y - np.exp(x) * x).sum(axis=1)
    np.testing.assert_allclose(got, s * s + e, rtol=1e-5, atol=1e-5)
    graph = f.graph.without_shape_inputs()
    merged = merge_common_subexprs(graph)
    names = [n.op.name for n in merged.nodes]
    assert names.count("reduce") == 2                 # sum(a*b+1) once, the last sum
    assert names.count("mul") == 4                    # a*b once, the square, two exp products
    assert names.count("exp") == 2


def test_random_ops_are_not_merged():
    @trace(symbolic=True)
    def f():
        return mge.random.uniform(size=(64,)) - mge.random.uniform(size=(64,))

    # MegEngine: each opr draws from its own generator fresh from the same seed, so two
    # identical `uniform`s give equal numbers; they stay two ops all the same
    for _ in range(3):
        np.testing.assert_array_equal(f().numpy(), np.zeros(64, np.float32))
    graph = f.graph.without_shape_inputs()
    rng_nodes = [n for n in graph.nodes if n.op.name.startswith("rng_")]
    assert len(rng_nodes) == 2
    assert not set(duplicates(graph)) & {v for n in rng_nodes for v in n.outputs}


def test_strided_weight_gradient_transposes_its_output_gradient_once(rng):
    conv = mge.module.Conv2d(4, 8, 3, stride=2, padding=1)
    gm = GradManager().attach(conv.parameters())
    x = mge.tensor(rng.standard_normal((2, 4, 9, 9)).astype("float32"))

    @trace(symbolic=True)
    def step(data):
        with gm:
            loss = (conv(data) ** 2).sum()
            gm.backward(loss)
        return conv.weight.grad

    got = step(x).numpy()
    conv.weight.grad = None
    with gm:                                            # the same gradient, eagerly
        gm.backward((conv(x) ** 2).sum())
    np.testing.assert_allclose(got, conv.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    graph = step.graph.without_shape_inputs()
    assert duplicates(graph)
    assert merge_common_subexprs(graph).nodes.__len__() < len(graph.nodes)
