"""Ways tracing can change results, and what megtrace does about each (MegEngine's
behaviour unless noted):

1. Python branches on tensor values: the value read while tracing is kept by the
   compiled graph; a replay that takes another branch raises "operator mismatch".
2. `.numpy()` inside the traced function: works on every call (the value becomes an
   extra output of the compiled graph); values never read while tracing are unreadable.
3. Python globals used as scalars: they become constants; a changed global raises
   "tensors not equals" on replay, and is silently ignored with `without_host=True`
   (Python does not run then).
4. In-place updates of parameters between calls: with capture_as_const they raise
   "tensors not equals"; without it the new value is used.
5. Side effects (prints, appends) run on every replay, and only once with without_host.
6. Shapes read as Python ints: each new input shape is traced again
   (symbolic_shape=True), so reshape(x, (x.shape[0], -1)) stays right for any batch.
7. Training-mode BatchNorm inside a trace: its statistics are eager-only, so compiling
   such a graph raises UnsupportedOpError instead of silently freezing them.
"""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace


def t(values):
    return mge.tensor(np.asarray(values, np.float32))


def test_branch_on_value():
    @trace
    def f(x):
        return F.relu(x) if x.sum() > 0 else F.neg(x)

    np.testing.assert_allclose(f(t([1.0, 2.0])).numpy(), [1.0, 2.0])
    np.testing.assert_allclose(f(t([3.0, -1.0])).numpy(), [3.0, 0.0])   # same branch
    with pytest.raises(mge.TraceError, match="operator mismatch"):
        f(t([-3.0, -1.0]))


def test_numpy_inside_trace_is_kept():
    seen = []

    @trace(symbolic=True)
    def f(x):
        y = x * 2
        seen.append(y.numpy().copy())
        return y + 1

    f(t([1.0]))
    f(t([5.0]))
    np.testing.assert_allclose(seen[-1], [10.0])


def test_changed_global_scalar():
    scale = {"v": 2.0}

    @trace
    def f(x):
        return x * scale["v"]

    f(t([1.0]))
    scale["v"] = 3.0
    with pytest.raises(mge.TraceError, match="tensors not equals"):
        f(t([1.0]))

    @trace(without_host=True)
    def g(x):
        return x * scale["v"]

    g(t([1.0]))
    scale["v"] = 4.0
    np.testing.assert_allclose(g(t([1.0])).numpy(), [3.0])   # frozen: Python did not run


def test_in_place_parameter_update():
    lin = M.Linear(2, 1)
    lin.weight._set_value(np.ones((1, 2)))
    lin.bias._set_value(np.zeros(1))
    x = t([[1.0, 2.0]])

    frozen = trace(lambda v: lin(v), capture_as_const=True)
    live = trace(lambda v: lin(v))
    frozen(x)
    live(x)
    lin.bias._set_value(np.full(1, 10.0))
    np.testing.assert_allclose(live(x).numpy(), [[13.0]])
    with pytest.raises(mge.TraceError, match="tensors not equals: bias"):
        frozen(x)


def test_side_effects_run_per_replay_unless_without_host():
    calls = []

    def body(x):
        calls.append(1)
        return x + 1

    replayed, fast = trace(body), trace(body, without_host=True)
    for _ in range(3):
        replayed(t([0.0]))
    assert len(calls) == 3
    calls.clear()
    for _ in range(3):
        fast(t([0.0]))
    assert len(calls) == 1


def test_shapes_as_python_ints_retrace_per_shape():
    @trace(symbolic=True)
    def f(x):
        return F.reshape(x, (x.shape[0], -1)).sum(axis=1)

    for batch in (1, 8):
        x = mge.tensor(np.ones((batch, 2, 3), np.float32))
        np.testing.assert_allclose(f(x).numpy(), np.full(batch, 6.0))


def test_training_batchnorm_is_not_silently_frozen():
    """Its running statistics move on every call of the compiled trace, as in MegEngine."""
    bn = M.BatchNorm2d(2)      # training mode

    @trace(symbolic=True)
    def f(x):
        return bn(x)

    seen = []
    for value in (1.0, 2.0, 3.0):
        f(mge.tensor(np.full((2, 2, 3, 3), value, np.float32)))
        seen.append(float(bn.running_mean.numpy().ravel()[0]))
    np.testing.assert_allclose(seen, [0.1, 0.29, 0.561], rtol=1e-6)
