"""Replay errors keep MegEngine's message first, then say where the traced and the
replayed op came from in the user's code and the likely fix; mge.load on a graph file
says to use load_graph."""
import pickle

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _line_of(func, text):
    import inspect
    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def _message(error):
    return "\n".join([str(error), *getattr(error, "__notes__", [])])


def test_if_on_a_tensor_value_points_at_the_branch():
    def body(x):
        if x.sum() > 0:                      # the value read that froze the branch
            return F.relu(x)
        return F.sigmoid(x)
    f = trace(body, symbolic=True)
    f(mge.tensor(np.ones(3, "float32")))
    with pytest.raises(mge.TraceError) as info:
        f(mge.tensor(-np.ones(3, "float32")))
    text = _message(info.value)
    assert text.startswith("trace error because operator mismatch")
    assert f"traced at {__file__}:{_line_of(body, 'F.relu')}" in text
    assert f"replayed at {__file__}:{_line_of(body, 'F.sigmoid')}" in text
    assert f"{__file__}:{_line_of(body, 'x.sum() > 0')}" in text
    assert "a Python `if` on a tensor" in text and "F.where" in text


def test_branch_on_a_python_value_has_another_hint():
    flag = {"relu": True}
    f = trace(lambda x: F.relu(x) if flag["relu"] else F.sigmoid(x), symbolic=True)
    f(mge.tensor(np.ones(3, "float32")))
    flag["relu"] = False
    with pytest.raises(mge.TraceError) as info:
        f(mge.tensor(np.ones(3, "float32")))
    assert "depends on something other than its tensor arguments" in _message(info.value)


def test_int_of_a_tensor_used_as_a_constant():
    def body(x):
        n = int(x.sum())
        return x * n
    f = trace(body, symbolic=True)
    f(mge.tensor(np.ones(3, "float32")))
    with pytest.raises(mge.TraceError) as info:
        f(mge.tensor(np.full(3, 2, "float32")))
    text = _message(info.value)
    assert text.startswith("trace error because tensors not equals")
    assert "int(tensor) / float(tensor) / .item() used as a constant" in text
    assert f"{__file__}:{_line_of(body, 'int(x.sum())')}" in text
    assert f"traced at {__file__}:{_line_of(body, 'x * n')}" in text


def test_captured_tensor_changed_after_tracing():
    w = mge.tensor(np.ones(3, "float32"))
    f = trace(lambda x: x * w, symbolic=True, capture_as_const=True)
    f(mge.tensor(np.ones(3, "float32")))
    w[:] = 2
    with pytest.raises(mge.TraceError) as info:
        f(mge.tensor(np.ones(3, "float32")))
    assert "captured as a constant" in _message(info.value)


def test_load_on_a_graph_file_says_load_graph(fixtures_dir):
    with pytest.raises(pickle.UnpicklingError,
                       match="this is a MegEngine graph file .* use megtrace.load_graph"):
        mge.load(fixtures_dir / "mlp_plain.mge")
    with pytest.raises(pickle.UnpicklingError,
                       match="this is a MegEngine graph file"):
        mge.load(fixtures_dir / "convnet_testcase.mge")
    with open(fixtures_dir / "mlp_fbs1.mge", "rb") as fh:
        with pytest.raises(pickle.UnpicklingError, match="graph file"):
            mge.load(fh)
