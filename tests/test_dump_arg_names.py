"""trace.dump's input names from arg_names, as MegEngine 1.13 gives them
(tests/data/show_megengine_dump_arg_names.py): arg_names covers the positional
arguments only, keyword inputs are named after their keyword, an empty name becomes
h2d[<var id>], and a name several inputs share becomes name[0], name[1], ..."""
import io

import numpy as np
import pytest

import megtrace as mge
from megtrace.jit import trace
from megtrace.utils.network import Network


def _t(*shape):
    return mge.tensor(np.ones(shape, "float32"))


def _fk(x, *, y):
    return x - y


def _fzy(x, **kw):
    return x - kw["z"] * 2 + kw["y"] * 3


def _f3(x, w, v, *, k):
    return x * 2 - w + v * k


CALLS = {
    "fk": (_fk, (_t(2, 3),), {"y": _t(1, 3)}),
    "fzy": (_fzy, (_t(2, 3),), {"z": _t(1, 3), "y": _t(3)}),
    "f3": (_f3, (_t(2, 3), _t(1, 3), _t(3)), {"k": _t(1, 1)}),
}
# MegEngine 1.13's printed (name, shape) pairs of each dump's inputs
NAMED = [
    ("fk", None, [("arg_0", (2, 3)), ("y", (1, 3))]),
    ("fk", ["x"], [("x", (2, 3)), ("y", (1, 3))]),
    ("fk", "x", [("x", (2, 3)), ("y", (1, 3))]),
    ("fk", ["y"], [("y[0]", (2, 3)), ("y[1]", (1, 3))]),
    ("fzy", None, [("arg_0", (2, 3)), ("y", (3,)), ("z", (1, 3))]),
    ("fzy", ["x"], [("x", (2, 3)), ("y", (3,)), ("z", (1, 3))]),
    ("f3", None, [("arg_0", (2, 3)), ("arg_1", (1, 3)), ("arg_2", (3,)), ("k", (1, 1))]),
    ("f3", [None, None, ""], [("h2d[0]", (2, 3)), ("h2d[2]", (1, 3)), ("h2d[4]", (3,)),
                              ("k", (1, 1))]),
    ("f3", ["a", None, "a"], [("a[0]", (2, 3)), ("a[1]", (3,)), ("h2d[2]", (1, 3)),
                              ("k", (1, 1))]),
    ("f3", ["k", "k", None], [("h2d[4]", (3,)), ("k[0]", (2, 3)), ("k[1]", (1, 3)),
                              ("k[2]", (1, 1))]),
    ("f3", [None, "x", "x"], [("h2d[0]", (2, 3)), ("k", (1, 1)), ("x[0]", (1, 3)),
                              ("x[1]", (3,))]),
]
WRONG_COUNT = [("fk", ["x", "y"], 1), ("f3", ["a", "b"], 3), ("f3", "a", 3), ("f3", [], 3)]


def _traced(name):
    fn, args, kwargs = CALLS[name]
    f = trace(fn, symbolic=True, capture_as_const=True)
    f(*args, **kwargs)
    return f


@pytest.mark.parametrize("name, arg_names, want", NAMED)
def test_input_names_match_megengine(name, arg_names, want):
    buf = io.BytesIO()
    _traced(name).dump(buf, arg_names=arg_names, optimize_for_inference=False)
    buf.seek(0)
    got = sorted((v.name, tuple(v.shape)) for v in Network.load(buf).input_vars)
    assert got == want


@pytest.mark.parametrize("name, arg_names, count", WRONG_COUNT)
def test_wrong_count_names_megengines_error(name, arg_names, count):
    with pytest.raises(ValueError, match=rf"^wrong number of arg_names, should be {count} "
                                         "values$"):
        _traced(name).dump(io.BytesIO(), arg_names=arg_names)


def test_keyword_input_runs_by_its_keyword(tmp_path):
    f = _traced("fk")
    f.dump(tmp_path / "k.mge", arg_names=["x"], optimize_for_inference=False)
    x, y = np.full((2, 3), 5, "float32"), np.arange(3, dtype="float32").reshape(1, 3)
    out = mge.load_graph(tmp_path / "k.mge").run(x=x, y=y)
    np.testing.assert_array_equal(next(iter(out.values())), x - y)
