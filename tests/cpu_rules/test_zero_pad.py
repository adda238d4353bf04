"""A concat of one value with all-zero constants is built as a zero `pad` of that value
(relay_bridge/cpu/zero_pad.py), so no array of zeros is kept and read; the compiled
result is checked against NumPy's concatenate, and the gradients that make such concats
(a strided conv's weight gradient, dead_taps.py's crop) against the eager tape."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.autodiff import GradManager
from megtrace.jit import trace
from megtrace.relay_bridge.cpu.dead_taps import crop_dead_taps
from megtrace.relay_bridge.cpu.zero_pad import concat_zeros_as_pad


def _ops(graph) -> list[str]:
    return [n.op.name for n in graph.nodes]


def test_zeros_around_a_value_become_one_pad(rng):
    x = rng.standard_normal((2, 3, 40)).astype("float32")

    @trace(symbolic=True)
    def f(a):
        return F.concat([F.zeros((2, 1, 40)), a, F.zeros((2, 2, 40))], axis=-2) * 2

    got = f(mge.tensor(x)).numpy()
    want = np.concatenate([np.zeros((2, 1, 40)), x, np.zeros((2, 2, 40))], axis=1) * 2
    np.testing.assert_array_equal(got, want.astype("float32"))
    pads = [n for n in concat_zeros_as_pad(f.graph).nodes if n.op.name == "pad"]
    assert len(pads) == 1 and "concat" not in _ops(concat_zeros_as_pad(f.graph))
    assert pads[0].kwargs["pad_width"] == ((0, 0), (1, 2), (0, 0))


@pytest.mark.parametrize("fill, dtype", [(1, "float32"),   # a non-zero constant
                                         (0, "int32")])    # an integer concat
def test_other_concats_are_kept(fill, dtype, rng):
    x = rng.integers(0, 9, (2, 3, 4)).astype(dtype)
    f = trace(symbolic=True)(lambda a: F.concat([F.full((2, 1, 4), fill, dtype=dtype), a],
                                                axis=1))
    got = f(mge.tensor(x)).numpy()
    np.testing.assert_array_equal(got, np.concatenate([np.full((2, 1, 4), fill, dtype), x], 1))
    graph = f.graph
    assert concat_zeros_as_pad(graph) is graph


def test_two_live_values_are_kept(rng):
    x = rng.standard_normal((2, 3)).astype("float32")
    f = trace(symbolic=True)(lambda a: F.concat([a, F.zeros((2, 1)), a * 2], axis=1))
    f(mge.tensor(x))
    graph = f.graph
    assert concat_zeros_as_pad(graph) is graph


@pytest.mark.parametrize("xs, ws, stride", [
    ((4, 8, 9, 9), (16, 8, 3, 3), 2),       # polyphase weight gradient: padded phases
    ((4, 16, 1, 1), (16, 16, 3, 3), 1),     # 1x1 map: dead taps put back as zeros
])
def test_weight_gradients_built_with_pads_match_eager(xs, ws, stride, rng):
    x = mge.tensor(rng.standard_normal(xs).astype("float32"))
    w = mge.Parameter(rng.standard_normal(ws).astype("float32"))
    gm = GradManager().attach([w])

    def grad(a):
        with gm:
            gm.backward(F.conv2d(a, w, stride=stride, padding=1).sum())
        g = w.grad
        w.grad = None
        return g

    want = grad(x).numpy()
    traced = trace(symbolic=True)(grad)
    got = traced(x).numpy()
    built = crop_dead_taps(traced.graph.without_shape_inputs())    # as the build does
    assert "pad" in _ops(concat_zeros_as_pad(built))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
