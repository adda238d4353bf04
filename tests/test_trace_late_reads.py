"""A value the traced function leaves behind (an attribute, param.grad, a list or dict
outside) stays readable after every call, as in MegEngine (what real MegEngine 1.13
printed for these cases: tests/data/show_megengine_values_left_behind.py): the compiled
graph keeps every value still referenced when the function returns, and one Python read
only later makes it build again to keep that one too."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.module as M
from megtrace.jit import trace


@pytest.mark.parametrize("symbolic", [False, True])
def test_value_read_after_the_tracing_call_is_kept(symbolic):
    box = {}

    @trace(symbolic=symbolic)
    def f(x):
        box["side"] = x * 3 + 1
        return x * 2

    for i in range(4):
        x = np.random.RandomState(i).rand(5).astype("float32")
        y = f(mge.tensor(x))
        np.testing.assert_allclose(y.numpy(), x * 2, rtol=1e-6)
        np.testing.assert_allclose(box["side"].numpy(), x * 3 + 1, rtol=1e-6)


@pytest.mark.parametrize("symbolic", [False, True])
def test_values_left_behind_hold_values_after_every_call(symbolic):
    """Never read after the tracing call, a dict entry, a list of features and a module
    attribute an EMA rebinds all hold this call's values (the EMA's, used on the next
    call, is then an input from outside); MegEngine 1.13's figures."""
    box = {}

    @trace(symbolic=symbolic)
    def f(x):
        box["side"] = x * 3 + 1
        return x * 2
    f(mge.tensor(np.ones(3, "float32")))      # box["side"] not read after this call
    f(mge.tensor(np.ones(3, "float32") * 2))
    assert box["side"].numpy().tolist() == [7.0, 7.0, 7.0]

    feats = []

    @trace(symbolic=symbolic)
    def g(a):
        b = a + 1
        feats.append(b)
        return b * 2
    outs = [g(mge.tensor([1., 2.]) * i).numpy().tolist() for i in range(3)]
    assert outs == [[2.0, 2.0], [4.0, 6.0], [6.0, 10.0]]
    assert feats[-1].numpy().tolist() == [3.0, 5.0] and feats[0].numpy().tolist() == [1.0, 1.0]

    class Ema(M.Module):
        def __init__(self):
            super().__init__()
            self.ema = mge.tensor([0.0])

        def forward(self, x):
            self.ema = self.ema * 0.5 + x.mean() * 0.5
            return x * 2
    net = Ema()
    h = trace(net, symbolic=symbolic)
    assert [h(mge.tensor([float(i)])).numpy().tolist() for i in (1, 2, 3)] == [[2.0], [4.0],
                                                                               [6.0]]
    assert net.ema.numpy().tolist() == [2.125]


@pytest.mark.parametrize("symbolic", [False, True])
def test_eager_ops_on_values_a_trace_left_behind(symbolic):
    """An optimizer stepping eagerly after a traced backward reads param.grad, a tensor
    the trace left behind, through ordinary ops."""
    box = {}

    @trace(symbolic=symbolic)
    def f(x):
        box["side"] = x * 3
        return x + 1

    for i in range(3):
        x = np.full(4, float(i), "float32")
        f(mge.tensor(x))
        np.testing.assert_allclose((box["side"] * 2 + 1).numpy(), x * 6 + 1)
