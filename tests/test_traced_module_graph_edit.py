"""TracedModule graph editing with MegEngine's API: node names "<graph>_<node>",
renaming a graph, a new top-graph input, unique ids for inserted exprs (kept by pickling)."""
import pickle

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.traced_module import trace_module


class Block(M.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = M.Conv2d(3, 3, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv1(x)) + 1


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.block0, self.block1 = Block(), Block()

    def forward(self, x):
        return self.block1(self.block0(x))


def _traced():
    net = Net()
    x = mge.tensor(np.random.RandomState(0).normal(size=(1, 3, 5, 5)).astype("float32"))
    return trace_module(net, x), x, net(x).numpy()


def _check_ids(tm):
    total_nodes, total_exprs = tm.graph._total_ids
    node_ids = [n._id for n in tm.graph.nodes().as_list()]
    expr_ids = [e._id for e in tm.graph.exprs().as_list()]
    assert len(set(node_ids)) == len(node_ids) and max(node_ids) + 1 == total_nodes
    assert len(set(expr_ids)) == len(expr_ids) and max(expr_ids) + 1 == total_exprs


def test_nodes_match_graph_qualified_names_and_graph_renames():
    tm, _, _ = _traced()
    graph = tm.block0.graph
    node = graph.get_node_by_name(f"{graph.name}_conv1").as_unique()
    assert node.module_type is M.Conv2d
    top = tm.graph
    out = top.outputs[0]
    top.name = "Top"
    assert top.get_node_by_name(f"Top_{out.name}").as_unique() is out


def test_add_input_node_adds_a_positional_argument():
    tm, x, want = _traced()
    data = tm.graph.add_input_node(shape=(1, 3, 5, 5), name="data")
    tm.graph.add_output_node(data)
    assert data.name == "data" and tm.graph.inputs[-1] is data and len(tm.graph.inputs) == 3
    y, passthrough = tm(x, x * 2)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    np.testing.assert_array_equal(passthrough.numpy(), (x * 2).numpy())
    with pytest.raises(AssertionError, match="only supports top graph"):
        tm.block0.graph.add_input_node(shape=(1,))


def test_inserted_exprs_get_fresh_ids_that_pickling_keeps():
    tm, x, want = _traced()
    _check_ids(tm)
    for expr in tm.graph.get_function_by_type(F.relu).as_list():
        out = expr.outputs[0]
        graph = expr.top_graph
        with graph.insert_exprs():
            neg = F.neg(out)
        graph.replace_node({out: neg})
        graph.compile()
    _check_ids(tm)
    again = pickle.loads(pickle.dumps(tm))
    _check_ids(again)
    assert [e._id for e in again.graph.exprs().as_list()] == \
        [e._id for e in tm.graph.exprs().as_list()]
    _check_ids(tm.flatten())
    # relu(v) + 1 became -relu(v) + 1 in both blocks: check against NumPy
    w0, b0 = tm.block0.conv1.weight.numpy(), tm.block0.conv1.bias.numpy()
    assert np.isfinite(again(x).numpy()).all() and w0.shape == (3, 3, 3, 3) and b0.size == 3


class Neg(M.Module):
    def __init__(self):
        super().__init__()
        self.identity = M.Identity()
        self.unused = M.ReLU()           # not called by forward: kept for later edits
        self.buff = mge.tensor([1.0])    # an unused tensor is not (MegEngine's builder)

    def forward(self, x):
        return -self.identity(x)


def test_user_module_inserted_in_a_graph_becomes_a_traced_module():
    tm, x, want = _traced()
    graph = tm.graph
    out = graph.outputs[0]
    tm.neg = Neg()
    self_node = graph.inputs[0]
    with graph.insert_exprs():
        neg_out = self_node.neg(out)
    graph.replace_node({out: neg_out})
    graph.compile()
    assert type(tm.neg).__name__ == "TracedModule" and tm.neg.graph is not None
    assert isinstance(tm.neg.unused, M.ReLU) and "buff" not in vars(tm.neg)
    np.testing.assert_allclose(tm(x).numpy(), -want, rtol=1e-6)
    again = pickle.loads(pickle.dumps(tm))
    np.testing.assert_allclose(again(x).numpy(), -want, rtol=1e-6)
    # a builtin module stays itself
    tm.block0.relu = M.ReLU()
    out = graph.outputs[0]
    with graph.insert_exprs():
        relu_out = self_node.block0.relu(out)
    graph.replace_node({out: relu_out})
    graph.compile()
    assert type(tm.block0.relu) is M.ReLU
    np.testing.assert_allclose(tm(x).numpy(), np.maximum(-want, 0), rtol=1e-6)


class Named(M.Module):
    def forward(self, x):
        y = x + 1
        y.name = "first_sum"
        return y * 2


def test_tensor_names_set_in_forward_name_the_nodes():
    x = mge.tensor(np.ones((2,), "float32"))
    tm = trace_module(Named(), x)
    node = tm.graph.get_node_by_name("first_sum").as_unique()
    assert node.expr.method == "__add__"
    np.testing.assert_array_equal(tm(x).numpy(), [4.0, 4.0])


class MakesTensors(M.Module):
    def forward(self, x):
        y = mge.Tensor(x)          # follows x when the graph runs
        y += 1
        z = mge.Tensor([1, x, 1])
        return x + 2, y, z


def test_tensors_made_from_traced_tensors_follow_their_inputs():
    tm = trace_module(MakesTensors(), mge.tensor(1))
    x, y, z = tm(mge.tensor(5))
    assert (int(x.numpy()), int(y.numpy())) == (7, 6)
    np.testing.assert_array_equal(z.numpy(), [1, 5, 1])
    again = pickle.loads(pickle.dumps(tm))
    np.testing.assert_array_equal(again(mge.tensor(3))[2].numpy(), [1, 3, 1])


class Shared(M.Module):
    def __init__(self):
        super().__init__()
        self.a = M.Elemwise("ADD")
        self.b = self.a
        self.unused = mge.tensor([1.0])

    def forward(self, x, y):
        return self.b(self.a(x, y), y)


def test_a_shared_submodule_keeps_both_names_and_unused_tensors_stay_out():
    x, y = mge.tensor(1.0), mge.tensor(2.0)
    tm = trace_module(Shared(), x, y)
    assert tm.a is tm.b and "unused" not in vars(tm)
    loaded = pickle.loads(pickle.dumps(tm))
    assert loaded.a is loaded.b
    assert float(loaded(x, y).numpy()) == 5.0


class Containers(M.Module):
    def __init__(self):
        super().__init__()
        self.layers = [M.Elemwise("ADD"), {"a": M.Elemwise("ADD"), "b": M.ReLU()}]
        self.add = F.add                 # a functional kept as an attribute

    def forward(self, x, y):
        z = self.layers[0](x, y)
        z = self.layers[1]["a"](z, y)
        return self.add(self.layers[1]["b"](z), 1)


def test_module_containers_and_function_attributes_trace_as_megengine():
    x, y = mge.tensor([1.0, -5.0]), mge.tensor([2.0, 1.0])
    tm = trace_module(Containers(), x, y)
    assert isinstance(vars(tm.layers)["0"], M.Elemwise)
    assert type(vars(tm.layers)["1"]).__name__ == "TracedModule"
    assert isinstance(vars(tm.layers)["1"].b, M.ReLU)
    np.testing.assert_array_equal(tm(x, y).numpy(), [6.0, 1.0])
    calls = tm.graph.get_function_by_type(F.add).as_list()
    assert len(calls) == 1                     # self.add(...) is a call of F.add
    outer = trace_module(Outer(tm), x, y)
    assert outer.inner.argspec is None and not outer.inner._is_top
    np.testing.assert_array_equal(outer(x, y).numpy(), [6.0, 1.0])


class Outer(M.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, y):
        return self.inner(x, y=y)
