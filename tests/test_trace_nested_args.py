"""Tensors nested in tuple/list arguments of a traced function are inputs of the trace
(MegEngine flattens arguments), so their values may change between calls."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.errors import TraceError
from megtrace.jit import trace


@pytest.mark.parametrize("symbolic", [False, True])
def test_broadcast_to_shape_of_none_and_tensors(symbolic):
    x = np.arange(3, dtype=np.float32).reshape(1, 3, 1)

    @trace(symbolic=symbolic)
    def broadcast(inp, shape):
        return F.broadcast_to(inp, shape)

    for target in [(2, None, 3), (3, None, 3), (1, None, 1), (2, None, 3)]:
        shape = tuple(None if v is None else mge.tensor(v) for v in target)
        out = broadcast(mge.tensor(x), shape)
        want = tuple(3 if v is None else v for v in target)
        np.testing.assert_array_equal(out.numpy(), np.broadcast_to(x, want))


@pytest.mark.parametrize("symbolic", [False, True])
def test_tensors_in_a_list_are_fed_anew(symbolic):
    @trace(symbolic=symbolic)
    def weighted(pair, scale):
        a, b = pair
        return a * scale + b

    rng = np.random.default_rng(0)
    for _ in range(3):
        a, b = rng.standard_normal((2, 4)).astype(np.float32)
        out = weighted([mge.tensor(a), mge.tensor(b)], mge.tensor(np.float32(2.0)))
        np.testing.assert_allclose(out.numpy(), a * 2 + b, rtol=1e-6)


def test_changed_nesting_is_an_input_mismatch():
    @trace(symbolic_shape=False)
    def add(pair):
        return pair[0] + pair[-1]

    one = mge.tensor(np.ones(2, np.float32))
    add((one, one))
    with pytest.raises(TraceError, match="inputs size mismatch"):
        add((one, one, one))


def test_changed_nesting_traces_again_with_symbolic_shape():
    @trace(symbolic_shape=True)
    def add(pair):
        return pair[0] + pair[-1]

    one = mge.tensor(np.ones(2, np.float32))
    two = mge.tensor(np.full(2, 2.0, np.float32))
    np.testing.assert_array_equal(add((one, one)).numpy(), [2, 2])
    np.testing.assert_array_equal(add((one, one, two)).numpy(), [3, 3])
