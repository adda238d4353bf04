"""What a traced function may return: as MegEngine 1.13 (checked in its chroot with the
same functions), Tensors anywhere in nested lists, tuples, namedtuples and dicts, with
numbers, strings and arrays beside them, come back in the same structure on every call
(the non-tensor parts as that call made them), symbolic or not."""
import collections

import numpy as np
import pytest

import megtrace as mge
from megtrace.jit import trace

T = mge.Tensor
P = collections.namedtuple("P", "a b")


def _plain(x):
    """The structure with Tensors as lists of their values."""
    if isinstance(x, T):
        return ("T", np.round(x.numpy(), 4).tolist())
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, P):
        return P(*map(_plain, x))
    if isinstance(x, (list, tuple)):
        return type(x)(map(_plain, x))
    return x


CASES = {
    "loss and a dict of metrics": (lambda a: ((a * a).mean(), {"acc": a.max(), "n": 4}),
                                   lambda v: (("T", float((v * v).mean())),
                                              {"acc": ("T", float(v.max())), "n": 4})),
    "a tensor and a number": (lambda a: (a + 1, 3), lambda v: (("T", (v + 1).tolist()), 3)),
    "nested containers": (lambda a: {"a": [a, (a + 1, a * 3)]},
                          lambda v: {"a": [("T", v.tolist()),
                                           (("T", (v + 1).tolist()), ("T", (v * 3).tolist()))]}),
    "a namedtuple": (lambda a: P(a + 1, "x"), lambda v: P(("T", (v + 1).tolist()), "x")),
}


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_nested_outputs_with_non_tensor_values(case, symbolic):
    body, want = CASES[case]
    f = trace(body, symbolic=symbolic)
    for i in range(3):          # the tracing call, then replays
        v = np.array([1.0, 2.0], np.float32) * (i + 1)
        assert _plain(f(T(v))) == want(v)


def test_an_array_read_inside_the_function_is_returned_as_is():
    f = trace(lambda a: (a * 2).numpy())
    for i in range(3):
        got = f(T([1.0, 2.0]) * (i + 1))
        assert isinstance(got, np.ndarray) and got.tolist() == [2.0 * (i + 1), 4.0 * (i + 1)]
