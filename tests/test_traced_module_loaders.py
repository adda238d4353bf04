"""traced_module.serialization loaders (MegEngine's API): registered loaders rewrite the
exprs of a TracedModule being unpickled; exprs they build by hand join the graph."""
import pickle

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.traced_module.serialization as S
from megtrace.traced_module import trace_module
from megtrace.traced_module.expr import CallMethod, Constant
from megtrace.traced_module.node import TensorNode


class AddOne(M.Module):
    def forward(self, x):
        return F.relu(x) + 1


@pytest.fixture
def clean_tables():
    saved = (S.FUNCTIONAL_LOADER, S.TENSORMETHOD_LOADER, S.MODULE_LOADER)
    S.FUNCTIONAL_LOADER, S.TENSORMETHOD_LOADER, S.MODULE_LOADER = {}, {}, {}
    yield
    S.FUNCTIONAL_LOADER, S.TENSORMETHOD_LOADER, S.MODULE_LOADER = saved


def test_tensor_method_loader_inserts_new_exprs(clean_tables):
    x = mge.tensor(np.array([-1.0, 2.0], "float32"))
    tm = trace_module(AddOne(), x)

    @S.register_tensor_method_loader("__add__")
    def add_twice(expr):              # x + 1 becomes x + (c + c) with c = 1 as a Constant
        args = list(expr.args)
        const = Constant(mge.tensor(np.float32(args[1])), "const").outputs[0]
        double = CallMethod(const, "__add__")
        double.set_args_kwargs(const, const)
        out = TensorNode(double, shape=const.shape, dtype=const.dtype)
        double.return_val = (out,)
        args[1] = out
        expr.set_args_kwargs(*args)

    loaded = pickle.loads(pickle.dumps(tm))
    np.testing.assert_array_equal(loaded(x).numpy(), [2.0, 4.0])     # relu(x) + 2
    exprs = loaded.graph._exprs
    assert isinstance(exprs[1], Constant) and len(exprs) == 4
    ids = [e._id for e in loaded.graph.exprs().as_list()]
    assert len(set(ids)) == len(ids) and min(ids) >= 0


def test_functional_loader_accepts_megengine_paths(clean_tables):
    x = mge.tensor(np.array([-1.0, 2.0], "float32"))
    tm = trace_module(AddOne(), x)
    seen = []

    @S.register_functional_loader(("megengine.functional.nn", "relu"))   # relu's home there
    def note(expr):
        seen.append(expr.func)

    pickle.loads(pickle.dumps(tm))
    assert seen == [F.relu]
    with pytest.raises(AssertionError, match="already has a loader"):
        S.register_functional_loader(("megtrace.functional.nn", "relu"))(note)
