"""megtrace.traced_module: trace_module records a module's forward as an editable graph
whose replay (TracedModule) computes what the original module computes."""
import collections
import copy
import io
import json
import pathlib
import pickle

import numpy as np
import pytest
from conftest import rel_err
from models import ConvNet, randomize_bn

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace import dispatch
from megtrace.jit import trace
from megtrace.traced_module import TracedModule, register_supported_type, trace_module, wrap

DATA = pathlib.Path(__file__).parent / "data" / "traced_module"


# -- models ---------------------------------------------------------------------------------
class Block(M.Module):          # also in data/traced_module/make_golden.py (real MegEngine)
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(4, 4, 3, padding=1)
        self.bn = M.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))) + x


class Net(M.Module):            # also in data/traced_module/make_golden.py (real MegEngine)
    def __init__(self):
        super().__init__()
        self.stem = M.Conv2d(3, 4, 3, padding=1)
        self.block = Block()
        self.fc = M.Linear(4, 10)

    def forward(self, x, scale=2.0):
        x = self.stem(x)
        x = self.block(x)
        x = self.block(x)          # the same submodule twice
        x = F.flatten(F.adaptive_avg_pool2d(x, 1), 1) * scale
        return self.fc(x)


class SharedParam(M.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = M.Conv2d(1, 1, 3, bias=False)
        self.conv1 = M.Conv2d(1, 1, 3, bias=False)
        self.conv1.weight = self.conv0.weight

    def forward(self, x):
        return self.conv0(x) - self.conv1(x * 2)


class ControlFlow(M.Module):
    """Python control flow over plain arguments, containers and keywords."""

    def __init__(self):
        super().__init__()
        self.lin = M.Linear(3, 3)
        self.scale = mge.Parameter(np.full((3,), 0.5, np.float32))

    def forward(self, xs, cfg, mode="sum", *, repeat=1):
        out = xs[0]
        for x in xs[1:]:
            out = out + x if mode == "sum" else out * x
        for _ in range(repeat):
            out = self.lin(out)
        if cfg["act"]:
            out = F.relu(out)
        return {"y": out * self.scale, "pair": (out, cfg["bias"] + out)}


@wrap
def shifted_square(x, shift):
    """A user function recorded as one CallFunction."""
    return (x + shift) ** 2


class UsesWrapAndRawOp(M.Module):
    def forward(self, x):
        y = shifted_square(x, 1.0)
        return dispatch.apply("exp", y)          # a bare registry op: an Apply expr


def _tensor(rng, *shape):
    return mge.tensor(rng.uniform(-1, 1, size=shape).astype(np.float32))


def _net(rng):
    net = Net()
    randomize_bn(net, rng)
    return net.eval()


# -- replay equals the original ---------------------------------------------------------------
def test_convnet_replay_matches_original(rng):
    net = randomize_bn(ConvNet(), rng).eval()
    x = _tensor(rng, 2, 3, 32, 32)
    tm = trace_module(net, x)
    assert isinstance(tm, TracedModule)
    x2 = _tensor(rng, 2, 3, 32, 32)           # new values replay the graph, not a record
    assert rel_err(tm(x2).numpy(), net(x2).numpy()) <= 1e-6


def test_shared_submodule_and_keyword_default(rng):
    net = _net(rng)
    tm = trace_module(net, _tensor(rng, 1, 3, 8, 8))
    x = _tensor(rng, 1, 3, 8, 8)
    assert rel_err(tm(x).numpy(), net(x).numpy()) <= 1e-6
    assert rel_err(tm(x, scale=2.0).numpy(), net(x).numpy()) <= 1e-6
    assert isinstance(tm.block, TracedModule) and isinstance(tm.stem, M.Conv2d)
    assert tm.stem is net.stem                 # builtin modules are shared, not copied
    calls = [e for e in tm.graph.exprs(False) if type(e).__name__ == "CallMethod"
             and e.inputs[0].name == "block"]
    assert len(calls) == 2 and calls[0].graph is calls[1].graph


def test_control_flow_over_args_kwargs_and_containers(rng):
    net = ControlFlow()
    xs = [_tensor(rng, 2, 3) for _ in range(3)]
    cfg = {"act": True, "bias": _tensor(rng, 2, 3)}
    tm = trace_module(net, xs, cfg, mode="prod", repeat=2)
    new_xs = [_tensor(rng, 2, 3) for _ in range(3)]
    new_cfg = {"act": True, "bias": _tensor(rng, 2, 3)}
    got = tm(new_xs, new_cfg, "prod", repeat=2)
    want = net(new_xs, new_cfg, mode="prod", repeat=2)
    assert set(got) == {"y", "pair"} and isinstance(got["pair"], tuple)
    assert rel_err(got["y"].numpy(), want["y"].numpy()) <= 1e-6
    assert rel_err(got["pair"][1].numpy(), want["pair"][1].numpy()) <= 1e-6
    # inputs: self, then the tensors named after the parameter they came in and their
    # position among its (sorted-key) leaves, as MegEngine names them
    assert [n.name for n in tm.graph.inputs] == ["self", "xs_0", "xs_1", "xs_2", "cfg_1"]
    # another structure (mode="sum" takes another branch) was not traced
    with pytest.raises(AssertionError, match="support input args kwargs format"):
        tm(new_xs, new_cfg, "sum", repeat=2)


def test_user_wrapped_function_and_bare_op(rng):
    net = UsesWrapAndRawOp()
    x = _tensor(rng, 4)
    tm = trace_module(net, x)
    kinds = [type(e).__name__ for e in tm.graph.exprs()]
    assert kinds == ["Input", "Input", "CallFunction", "Apply"]
    call = tm.graph.get_function_by_type(shifted_square).as_unique()
    assert call.args[1] == 1.0
    x2 = _tensor(rng, 4)
    np.testing.assert_allclose(tm(x2).numpy(), np.exp((x2.numpy() + 1.0) ** 2), rtol=1e-6)


def test_hooks_fire_on_traced_submodules(rng):
    net = _net(rng)
    tm = trace_module(net, _tensor(rng, 1, 3, 8, 8))
    seen = []
    handle = tm.block.register_forward_hook(lambda m, i, o: seen.append(type(m).__name__))
    tm(_tensor(rng, 1, 3, 8, 8))
    assert seen == ["TracedModule", "TracedModule"]
    handle.remove()
    tm(_tensor(rng, 1, 3, 8, 8))
    assert len(seen) == 2


# -- the graph, as real MegEngine names it ------------------------------------------------------
def _describe(graph):
    return {"name": graph.name,
            "inputs": [n.name for n in graph.inputs],
            "outputs": [n.name for n in graph.outputs],
            "exprs": [type(e).__name__ for e in graph.exprs(False)],
            "nodes": [n.name for n in graph.nodes(False)],
            "qualnames": [n.qualname for n in graph.nodes(False)]}


def test_graph_names_match_real_megengine(rng):
    """data/traced_module/golden_names.json: real MegEngine 1.13 tracing the same Net."""
    golden = json.loads((DATA / "golden_names.json").read_text())
    tm = trace_module(_net(rng), mge.tensor(np.zeros((1, 3, 8, 8), "float32")))
    assert _describe(tm.graph) == golden["top"]
    assert _describe(tm.block.graph) == golden["block"]
    assert [name for name, _ in tm.named_modules()] == golden["modules"]
    assert _describe(tm.flatten().graph) == golden["flat"]


def test_graph_queries(rng):
    tm = trace_module(_net(rng), _tensor(rng, 1, 3, 8, 8))
    graph = tm.graph
    relu = graph.get_function_by_type(F.relu).as_unique()      # found in the block's graph
    assert relu.top_graph is tm.block.graph and relu.outputs[0].name == "relu_out"
    assert graph.get_function_by_type(F.relu, recursive=False).as_count() == 0
    assert graph.get_module_by_type(M.Conv2d).as_count() == 2
    assert graph.get_method_by_type("__mul__").as_unique().args[1] == 2.0
    assert [n.name for n in graph.get_node_by_name("*conv*").as_list()] == ["conv", "conv_out"]
    assert [n.name for n in graph.get_node_by_name("*conv_ou?").as_list()] == ["conv_out"]
    with pytest.raises(AssertionError, match="bad pattern: None"):    # as MegEngine 1.13
        graph.get_node_by_name(None)
    out = graph.outputs[0]
    assert out.name == "fc_out" and tuple(out.shape) == (1, 10) and out.dtype == np.float32
    assert out.expr.inputs[0].owner is tm.fc
    assert "fc_out = fc(mul_out, )" in repr(graph)


# -- editing the graph ----------------------------------------------------------------------------
def test_insert_exprs_changes_the_output(rng):
    net = _net(rng)
    tm = trace_module(net, _tensor(rng, 1, 3, 8, 8))
    graph = tm.graph
    mul = graph.get_method_by_type("__mul__").as_unique().outputs[0]
    with graph.insert_exprs():
        neg = F.neg(mul)
        shifted = neg + 1
    graph.replace_node({mul: shifted})
    graph.compile()
    x = _tensor(rng, 1, 3, 8, 8)
    feat = F.flatten(F.adaptive_avg_pool2d(net.block(net.block(net.stem(x))), 1), 1) * 2.0
    want = net.fc(1 - feat)
    assert rel_err(tm(x).numpy(), want.numpy()) <= 1e-6
    names = [e.outputs[0].name for e in graph.exprs(False) if e.outputs]
    assert names.index("neg_out") == names.index("mul_out") + 1   # placed after its input


def test_replacing_a_submodule_and_removing_exprs(rng):
    net = _net(rng)
    tm = trace_module(net, _tensor(rng, 1, 3, 8, 8))
    tm.fc = M.Linear(4, 10)                    # the graph fetches `fc` when it runs
    x = _tensor(rng, 1, 3, 8, 8)
    feat = F.flatten(F.adaptive_avg_pool2d(net.block(net.block(net.stem(x))), 1), 1) * 2.0
    assert rel_err(tm(x).numpy(), tm.fc(feat).numpy()) <= 1e-6
    # skip the second block call: its users read the first call's result instead
    block = tm.graph.get_node_by_name("block_1_out").as_unique()
    first = tm.graph.get_node_by_name("block_out").as_unique()
    tm.graph.replace_node({block: first})
    tm.graph.compile()
    assert tm.graph.get_node_by_name("block_1_out").as_count() == 0
    feat1 = F.flatten(F.adaptive_avg_pool2d(net.block(net.stem(x)), 1), 1) * 2.0
    assert rel_err(tm(x).numpy(), tm.fc(feat1).numpy()) <= 1e-6


def test_flatten_inlines_every_traced_module(rng):
    net = _net(rng)
    tm = trace_module(net, _tensor(rng, 1, 3, 8, 8))
    flat = tm.flatten()
    assert all(not isinstance(n.owner, TracedModule) for n in flat.graph.nodes()
               if type(n).__name__ == "ModuleNode" and n.name != "self")
    x = _tensor(rng, 1, 3, 8, 8)
    assert rel_err(flat(x).numpy(), net(x).numpy()) <= 1e-6
    assert isinstance(tm.graph.get_node_by_name("block").as_unique().owner, TracedModule)


# -- pickling ------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["pickle", "megtrace.save"])
def test_pickle_round_trip(rng, how):
    net = SharedParam()
    tm = trace_module(net, _tensor(rng, 1, 1, 6, 6))
    if how == "pickle":
        loaded = pickle.loads(pickle.dumps(tm))
    else:
        buf = io.BytesIO()
        mge.save(tm, buf)
        buf.seek(0)
        loaded = mge.load(buf)                 # the safe loader: graphs are plain data
    assert type(loaded) is TracedModule
    assert loaded.conv0.weight is loaded.conv1.weight
    x = _tensor(rng, 1, 1, 6, 6)
    np.testing.assert_allclose(loaded(x).numpy(), net(x).numpy(), rtol=1e-6, atol=1e-6)
    assert [n.name for n in loaded.graph.nodes()] == [n.name for n in tm.graph.nodes()]


def test_pickled_wrapped_function_and_nested_graph(rng):
    tm = trace_module(UsesWrapAndRawOp(), _tensor(rng, 3))
    loaded = pickle.loads(pickle.dumps(tm))
    assert loaded.graph.get_function_by_type(shifted_square).as_count() == 1
    x = _tensor(rng, 3)
    np.testing.assert_allclose(loaded(x).numpy(), tm(x).numpy(), rtol=1e-6)
    net = _net(rng)
    tm2 = pickle.loads(pickle.dumps(trace_module(net, _tensor(rng, 1, 3, 8, 8))))
    assert isinstance(tm2.block, TracedModule)
    assert rel_err(tm2(_tensor(rng, 1, 3, 8, 8) * 0 + 1).numpy(),
                   net(mge.tensor(np.ones((1, 3, 8, 8), np.float32))).numpy()) <= 1e-6


# -- a TracedModule is a Module: jit.trace and dump ------------------------------------------------
@pytest.mark.lite
def test_traced_module_traces_dumps_and_runs_in_lite(rng, lite, tmp_path):
    net = _net(rng)
    tm = trace_module(net, _tensor(rng, 1, 3, 8, 8))

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return tm(data)

    x = rng.uniform(-1, 1, size=(1, 3, 8, 8)).astype(np.float32)
    traced_out = infer(mge.tensor(x))
    assert rel_err(traced_out.numpy(), net(mge.tensor(x)).numpy()) <= 1e-5
    path = tmp_path / "tm.mge"
    infer.dump(path, arg_names=["data"], output_names=["out"])
    outs = lite.run_model(path, {"data": x})
    assert rel_err(outs["out"], net(mge.tensor(x)).numpy()) <= 1e-4


# -- bad input ------------------------------------------------------------------------------------
class ReturnsInt(M.Module):
    def forward(self, x):
        return x, 3


def test_bad_input_gets_megengine_errors(rng):
    with pytest.raises(AssertionError):
        trace_module(lambda x: x, _tensor(rng, 2))
    with pytest.raises(AssertionError, match="doesn't support .* type, MUST use "
                                             "\"register_supported_type\""):
        trace_module(ControlFlow(), [_tensor(rng, 2, 3)], {"act": object(), "bias": 0})
    with pytest.raises(AssertionError, match="in return values, MUST use Tensor"):
        trace_module(ReturnsInt(), _tensor(rng, 2))
    with pytest.raises(TypeError, match="missing required positional arguments: x"):
        trace_module(ReturnsInt())


class RandomMask(M.Module):
    def forward(self, x):
        return F.dropout(x, 0.5, training=True)


def test_default_checker_compares_replay_with_original(rng, monkeypatch):
    from megtrace.traced_module import disable_default_checker, tm_config
    x = _tensor(rng, 64)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        trace_module(RandomMask(), x)          # a new mask on replay: outputs differ
    monkeypatch.setitem(tm_config._checks, "default", True)
    disable_default_checker()
    tm = trace_module(RandomMask(), x)
    kept = tm(x).numpy() != 0
    assert 0 < kept.sum() < 64                 # dropout is replayed, not frozen


class ReadsShapes(M.Module):
    """Shapes read in forward: the graph computes them, so any batch size runs."""

    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 4, 3, padding=1)
        self.fc = M.Linear(4 * 4 * 4 // 2, 5)

    def forward(self, x):
        y = self.conv(x)
        n, c = y.shape[0], y.shape[1]
        y = y.reshape(n, c, -1)[:, :, : y.shape[2] * y.shape[3] // 2]
        return self.fc(y.reshape(n, -1)) + F.zeros((n, 1))


def test_shapes_read_in_forward_stay_symbolic(rng):
    net = ReadsShapes()
    tm = trace_module(net, _tensor(rng, 1, 3, 4, 4))
    dims = tm.graph.get_function_by_type().as_list()
    assert any(e.func.__name__ == "dim" for e in dims)
    for batch in (1, 3):
        x = _tensor(rng, batch, 3, 4, 4)
        assert tm(x).shape == (batch, 5)
        assert rel_err(tm(x).numpy(), net(x).numpy()) <= 1e-6
    loaded = pickle.loads(pickle.dumps(tm))
    x = _tensor(rng, 2, 3, 4, 4)
    assert rel_err(loaded(x).numpy(), net(x).numpy()) <= 1e-6


@pytest.mark.lite
def test_traced_module_dump_keeps_batch_symbolic(rng, lite, tmp_path):
    net = ReadsShapes()
    tm = trace_module(net, _tensor(rng, 1, 3, 4, 4))

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return tm(data)

    infer(_tensor(rng, 1, 3, 4, 4))
    path = tmp_path / "shapes.mge"
    infer.dump(path, arg_names=["data"], output_names=["out"])
    x = rng.uniform(-1, 1, size=(4, 3, 4, 4)).astype(np.float32)
    outs = lite.run_model(path, {"data": x})
    assert rel_err(outs["out"], net(mge.tensor(x)).numpy()) <= 1e-4


def test_watch_points_end_points_and_changing_arguments(rng):
    net = _net(rng)
    tm = trace_module(net, _tensor(rng, 1, 3, 8, 8))
    x = _tensor(rng, 1, 3, 8, 8)
    stem_out = tm.graph.get_node_by_name("stem_out").as_unique()
    relu_out = tm.block.graph.get_node_by_name("relu_out").as_unique()
    tm.set_watch_points([stem_out, relu_out])
    tm(x)
    assert rel_err(tm.watch_node_value[stem_out].numpy(), net.stem(x).numpy()) == 0
    second_in = net.block(net.stem(x))         # the block runs twice: the last value stays
    want_relu = F.relu(net.block.bn(net.block.conv(second_in)))
    assert rel_err(tm.watch_node_value[relu_out].numpy(), want_relu.numpy()) <= 1e-6
    tm.clear_watch_points()
    tm.set_end_points([stem_out])
    assert rel_err(tm(x)[0].numpy(), net.stem(x).numpy()) == 0
    tm.clear_end_points()
    mul = tm.graph.get_method_by_type("__mul__").as_unique()
    assert mul.named_args["other"] == 2.0
    mul.set_arg("other", 3.0)
    assert rel_err(tm(x).numpy(), net(x, scale=3.0).numpy()) <= 1e-6
    pool = tm.graph.get_function_by_type(F.adaptive_avg_pool2d).as_unique()
    assert pool.named_args["oshp"] == 1
    with pytest.raises(AssertionError, match="Doesn't support set args/kwargs for GetAttr"):
        tm.graph.get_node_by_name("fc").as_unique().expr.set_args_kwargs()


Pair = collections.namedtuple("Pair", ["a", "b"])
register_supported_type(Pair, lambda p: ([p.a, p.b], None), lambda v, _: Pair(*v))


class TakesPair(M.Module):
    def __init__(self):
        super().__init__()
        self.lin = M.Linear(2, 2)

    def forward(self, p):
        return Pair(self.lin(p.a), p.a * p.b)


def test_register_supported_type_copy_and_pickle(rng):
    net = TakesPair()
    tm = trace_module(net, Pair(_tensor(rng, 2), _tensor(rng, 2)))
    p = Pair(_tensor(rng, 2), _tensor(rng, 2))
    out = tm(p)
    assert isinstance(out, Pair)
    np.testing.assert_allclose(out.b.numpy(), (p.a * p.b).numpy())
    twin = copy.deepcopy(tm)
    assert twin.lin is not tm.lin and twin.lin.weight is not tm.lin.weight
    twin.lin.weight[:] = 0.0
    np.testing.assert_allclose(twin(p).a.numpy(), net.lin.bias.numpy()[None].repeat(1, 0)[0])
    np.testing.assert_allclose(tm(p).a.numpy(), net.lin(p.a).numpy())
    loaded = pickle.loads(pickle.dumps(tm))
    np.testing.assert_allclose(loaded(p).a.numpy(), net.lin(p.a).numpy())
