"""Replay checks with MegEngine's exact messages (str(e) is MegEngine's, as its own
tests compare), megtrace's detail with the user's lines, and exclude_from_trace."""
import numpy as np
import pytest

import megtrace as mge
from megtrace.jit import TraceError, exclude_from_trace, trace


def _args():
    return (mge.tensor([1, 2, 3, 4]), mge.tensor([5, 6, 7, 8]), mge.tensor([9, 0, 1, 2]))


CASES = [
    ("a + b + c", "a + b - c", "operator mismatch"),
    ("a + b + 1", "a + b + 2", "tensors not equals"),
    ("(a + b, b + c)[0]", "a + b", "mismature end"),
    ("a + b + c", "c + (a + b)", "expect internal node, got external"),
    ("c + (a + b)", "a + b + c", "expect external node, got internal"),
    ("a + b + c", "a + b + c + c", "too many instructions"),
    ("(a + b, b + c)[1]", "(a + b, b + c)[0]", "data unreadable"),
    ("(a + b, b + c)[1] + a", "(a + b, b + c)[0] + a", "input id mismatch"),
]


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("traced, replayed, reason", CASES)
def test_mismatch_messages_are_megengines(traced, replayed, reason, symbolic):
    state = {"expr": traced}

    @trace(symbolic=symbolic)
    def fn(a, b, c):
        return eval(state["expr"])

    a, b, c = _args()
    want = eval(traced).numpy()
    np.testing.assert_equal(fn(a, b, c).numpy(), want)
    state["expr"] = replayed
    with pytest.raises(TraceError) as info:
        fn(a, b, c)
    assert str(info.value) == f"trace error because {reason}"
    state["expr"] = traced                       # the trace stays usable after an error
    np.testing.assert_equal(fn(a, b, c).numpy(), want)


def test_detail_names_the_traced_and_replayed_lines():
    flag = {"sub": False}

    @trace
    def fn(a, b):
        return a - b if flag["sub"] else a + b

    a, b, _ = _args()
    fn(a, b)
    flag["sub"] = True
    with pytest.raises(TraceError) as info:
        fn(a, b)
    detail = info.value.detail
    assert "traced add, now sub" in detail
    assert f"{__file__}:" in detail and "replayed at" in detail
    assert detail in info.value.__notes__


def test_capture_as_const_argument_message():
    @trace(capture_as_const=True)
    def fn(a):
        return a * 2

    with pytest.raises(TraceError) as info:
        fn(1)
    assert str(info.value) == "Only support tensor type args when capture_as_const is enabled"


def test_without_host_refuses_outside_tensors():
    const = mge.tensor([8.0])

    @trace(without_host=True)
    def fn(a):
        return a + const

    with pytest.raises(TraceError, match="maybe you can set `capture_as_const=True`"):
        fn(mge.tensor([1.0]))


def test_shape_errors_are_runtime_errors_and_the_trace_survives():
    @trace(symbolic=True)
    def fn(a, b):
        return a + b

    a = mge.tensor(np.arange(8).reshape(2, 4))
    fn(a, a)
    with pytest.raises(RuntimeError):
        fn(a, a.transpose())
    np.testing.assert_equal(fn(a, a).numpy(), 2 * np.arange(8).reshape(2, 4))


@pytest.mark.parametrize("symbolic", [False, True])
def test_exclude_from_trace_runs_eagerly_every_call(symbolic):
    calls = []

    @trace(symbolic=symbolic)
    def fn(x, flip):
        x = -x
        with exclude_from_trace():
            calls.append(1)
            if flip:
                x = -x
        return x * 10

    x = mge.tensor([1.0, 2.0])
    np.testing.assert_equal(fn(x, False).numpy(), [-10.0, -20.0])
    np.testing.assert_equal(fn(x, True).numpy(), [10.0, 20.0])
    np.testing.assert_equal(fn(mge.tensor([3.0, 4.0]), True).numpy(), [30.0, 40.0])
    assert len(calls) == 3


def test_exclude_from_trace_outside_a_trace_does_nothing():
    with exclude_from_trace():
        y = mge.tensor([1.0]) + 1
    np.testing.assert_equal(y.numpy(), [2.0])


def test_topk_clamps_k_and_kth_only_returns_value_and_first_index():
    x = np.array([5, 2, 7, 1, 0, 3, 2, 3], np.int32)
    kth, index = mge.functional.topk(mge.tensor(x), 3, kth_only=True)
    assert int(kth) == 3 and int(index) == int(np.flatnonzero(x == 3)[0])   # first 3
    rows = np.array([[1.0, 4.0], [3.0, 2.0]], np.float32)
    values, indices = mge.functional.topk(mge.tensor(rows), 5)             # k > row length
    np.testing.assert_equal(values.numpy(), -np.sort(-rows, axis=1))
    np.testing.assert_equal(indices.numpy(), np.argsort(-rows, axis=1))


def test_int_and_float_take_any_one_element_tensor():
    assert int(mge.tensor([[3]])) == 3 and float(mge.tensor([2.5])) == 2.5
    with pytest.raises(TypeError, match="one-element"):
        int(mge.tensor([1, 2]))


def test_argument_values_read_by_python_trace_again_per_value():
    runs = []

    @trace
    def fn(data, repeats):
        runs.append(1)
        return mge.functional.repeat(data, int(repeats), axis=0)

    data = mge.tensor(np.arange(4, dtype=np.float32).reshape(2, 2))
    for n in (1, 2, 3, 2, 3):
        got = fn(data, mge.tensor(n)).numpy()
        np.testing.assert_equal(got, np.repeat(data.numpy(), n, axis=0))
    assert len(runs) == 5 and len(fn._entries) == 3    # replays for the repeated values


def test_integer_powers_give_float32():
    x = mge.tensor([1, 2, 3])
    assert (x ** 2).dtype == np.float32
    np.testing.assert_allclose((x ** -1).numpy(), [1.0, 0.5, 1 / 3], rtol=1e-6)


def test_outside_values_given_in_place_of_traced_ones_are_fed():
    """As in MegEngine, an input traced on one outside value takes whatever outside value
    the replay gives there (here the other argument, or a global)."""
    state = {"swap": False}
    other = mge.tensor([100.0, 200.0])

    @trace(symbolic=True)
    def fn(a, b):
        return a - b if not state["swap"] else (b if state["swap"] == 1 else other) - a

    a, b = mge.tensor([1.0, 2.0]), mge.tensor([10.0, 20.0])
    np.testing.assert_equal(fn(a, b).numpy(), [-9.0, -18.0])
    state["swap"] = 1
    np.testing.assert_equal(fn(a, b).numpy(), [9.0, 18.0])
    state["swap"] = 2
    np.testing.assert_equal(fn(a, b).numpy(), [99.0, 198.0])
