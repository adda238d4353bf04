"""A value the traced function leaves behind (an attribute, param.grad) and Python reads
only after the call returns stays readable on every later call, as in MegEngine: the
compiled graph is built again to keep it. Values nobody read stay unreadable."""
import numpy as np
import pytest

import megtrace as mge
from megtrace.errors import TraceError
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


def test_a_value_never_read_is_unreadable_later():
    box = {}

    @trace(symbolic=True)
    def f(x):
        box["side"] = x * 3 + 1
        return x * 2

    f(mge.tensor(np.ones(3, "float32")))      # box["side"] not read after this call
    f(mge.tensor(np.ones(3, "float32")))
    with pytest.raises(TraceError, match="value unreadable"):
        box["side"].numpy()


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
