"""The replay's inline check (Replayer.record's common case) against the full one: what
it accepts must be what MegEngine accepts, everything else still gets the full check
and MegEngine's message."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import TraceError, exclude_from_trace, trace


def test_equal_params_of_another_type_still_replay():
    """A shape given as a list while tracing and as a tuple on replay binds to the same
    parameters: the inline check declines, the full one accepts."""
    state = {"shape": [2, 3]}

    @trace(symbolic=True)
    def fn(x):
        return F.reshape(x, state["shape"]) * 2

    x = mge.tensor(np.arange(6, dtype=np.float32))
    want = np.arange(6, dtype=np.float32).reshape(2, 3) * 2
    np.testing.assert_equal(fn(x).numpy(), want)
    state["shape"] = (2, 3)
    np.testing.assert_equal(fn(x).numpy(), want)
    state["shape"] = (3, 2)
    with pytest.raises(TraceError, match="operator mismatch"):
        fn(x)


def test_parameter_changed_in_place_is_caught():
    """An unchanged captured parameter passes inline; the same tensor object with a new
    value (its version moved) must reach the value comparison."""
    net = M.Linear(3, 2)

    @trace(symbolic=True, capture_as_const=True)
    def fn(x):
        return net(x)

    x = mge.tensor(np.ones((1, 3), np.float32))
    first = fn(x).numpy()
    np.testing.assert_equal(fn(x).numpy(), first)
    net.bias[...] = net.bias + 1
    with pytest.raises(TraceError, match="tensors not equals"):
        fn(x)


def test_argument_passed_in_place_of_another():
    """A replay that applies an op to a different argument than when traced goes
    through the full check (MegEngine feeds the value given there)."""
    state = {"swap": False}

    @trace(symbolic=True)
    def fn(a, b):
        return (b if state["swap"] else a) * 3 + b

    a, b = mge.tensor([1.0, 2.0]), mge.tensor([10.0, 20.0])
    np.testing.assert_equal(fn(a, b).numpy(), [13.0, 26.0])
    state["swap"] = True
    np.testing.assert_equal(fn(a, b).numpy(), [40.0, 80.0])


def test_exclude_from_trace_sees_every_live_tensor_once():
    """Traced tensors alive at exclude_from_trace become plain values on replay too
    (the replay keeps weak references to what it handed out)."""
    @trace(symbolic=True)
    def fn(x):
        y = x * 2
        z = y
        with exclude_from_trace():
            w = z.numpy().sum()
        return y + float(w)

    x = mge.tensor([1.0, 2.0])
    for _ in range(3):
        np.testing.assert_equal(fn(x).numpy(), [8.0, 10.0])


def test_replayed_tensors_have_every_field_wrap_sets():
    """Replayer.record builds its output tensors inline, field by field, as Tensor._wrap
    does: a field added to one and not the other shows here."""
    seen = {}

    @trace(symbolic=True)
    def fn(x):
        y = F.relu(x)
        seen["y"] = y
        return y

    x = mge.tensor([1.0, -2.0])
    fn(x)
    fn(x)                                     # the replay: seen["y"] from Replayer.record
    y = seen["y"]
    ref = mge.Tensor._wrap(None, y._var, y._owner, y._device)
    slots = [s for s in mge.Tensor.__slots__ if s not in ("__dict__", "__weakref__")]
    for name in slots:
        assert getattr(y, name) == getattr(ref, name), name
    assert vars(y) == vars(ref)


@pytest.mark.parametrize("given", [0.125, np.float32(0.125), 1 / 8])
def test_scalar_constant_given_again_replays_inline(request, given):
    """`x * c` with a Python/NumPy number equal to the traced one: the inline check
    accepts it (no full check), and the result is the compiled graph's."""
    state = {"c": 0.125}

    @trace(symbolic=True)
    def fn(x):
        return F.relu(x) * state["c"]

    x = mge.tensor(np.array([4.0, -1.0, 8.0], np.float32))
    np.testing.assert_equal(fn(x).numpy(), [0.5, 0.0, 1.0])
    calls = request.getfixturevalue("full_checks")      # counted from here on
    state["c"] = given
    np.testing.assert_equal(fn(x).numpy(), [0.5, 0.0, 1.0])
    assert calls == []


@pytest.mark.parametrize("changed", [0.25, float("nan"), [0.125, 0.125]])
def test_scalar_constant_changed_still_raises(request, changed):
    """A constant with another value (NaN included: MegEngine's comparator finds it
    unequal) or another shape: the inline check declines, the full check raises
    MegEngine's "tensors not equals"."""
    state = {"c": 0.125}

    @trace(symbolic=True)
    def fn(x):
        return x * mge.tensor(state["c"])

    x = mge.tensor(np.array([4.0, 8.0], np.float32))
    np.testing.assert_equal(fn(x).numpy(), [0.5, 1.0])
    calls = request.getfixturevalue("full_checks")      # counted from here on
    state["c"] = changed
    with pytest.raises(TraceError, match="tensors not equals"):
        fn(x)
    assert calls == ["mul"]


def test_nan_constant_traced_never_replays_inline():
    """A NaN traced as a constant: MegEngine's comparator never finds it equal again,
    so the replay raises; the inline check must not accept it either."""
    @trace(symbolic=True)
    def fn(x):
        return x + float("nan")

    x = mge.tensor(np.array([1.0], np.float32))
    assert np.isnan(fn(x).numpy()).all()
    with pytest.raises(TraceError, match="tensors not equals"):
        fn(x)
