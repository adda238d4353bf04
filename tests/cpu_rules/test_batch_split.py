"""A conv net's early layers run image by image at batch > 1
(relay_bridge/cpu/batch_split.py): same results as the batched graph (eager NumPy), the
cut only where one value crosses into the rest, nothing split where an op mixes images."""
import numpy as np
import pytest
from conftest import rel_err
from zoo import MobileNetV2, randomize_bn

import megtrace as mge
from megtrace.ir import Graph, TensorType
from megtrace.jit import trace
from megtrace.ops import get
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.cpu import batch_split


@pytest.fixture
def small_sizes(monkeypatch):
    """Split test-sized graphs (the real thresholds want MB-sized activations)."""
    monkeypatch.setattr(batch_split, "MIN_BATCH_BYTES", 0)


def f32(rng, *shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def _graph(x_shape):
    g = Graph()
    return g, g.add_input(TensorType(tuple(x_shape), "float32"), "x")


def _op(g, name, *inputs, **params):
    return g.add_node(get(name), list(inputs), params, name)[0]


def _conv(g, x, w, **params):
    return _op(g, "conv2d", x, g.add_const(w), **params)


def test_split_mobilenet_matches_eager(small_sizes, rng):
    net = randomize_bn(MobileNetV2(num_classes=10, width_mult=0.5), rng).eval()
    x = f32(rng, 3, 3, 32, 32)

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)
    infer(mge.tensor(x))
    graph = infer.graph.without_shape_inputs()
    count, cut = batch_split.find_cut(graph)
    assert cut.type.shape[0] == 3 and count > 10
    split = batch_split.split_batch(graph)
    names = [n.op.name for n in split.nodes]
    assert names.count("subtensor") == 3 and names.count("concat") == 1
    convs = [n for n in split.nodes if n.op.name == "conv2d"]
    assert {c.inputs[0].type.shape[0] for c in convs} == {1, 3}
    cg = compile_graph(graph)
    assert cg.pipeline == "cpu-rules"
    assert rel_err(cg(x)[0], net(mge.tensor(x)).numpy()) <= 1e-5


def test_cut_is_where_one_value_crosses(small_sizes, rng):
    """x -> conv a -> relu -> conv b -> a + b -> heavy conv: `a` is read again by the
    add, so the deepest cut is the add's output; the heavy conv stays batched."""
    g, x = _graph((2, 8, 12, 12))
    a = _conv(g, x, f32(rng, 16, 8, 1, 1))
    b = _conv(g, _op(g, "relu", a), f32(rng, 16, 16, 3, 3), padding=(1, 1))
    s = _op(g, "add", a, b)
    y = _conv(g, s, f32(rng, 256, 16, 3, 3))       # weight 147 KB: stays batched
    g.set_outputs([y], ["y"])
    count, cut = batch_split.find_cut(g)
    assert cut is s and count == 4
    xs = f32(rng, 2, 8, 12, 12)
    want = compile_graph(g, rules=False)(xs)[0]
    got = compile_graph(g)(xs)[0]
    assert rel_err(got, want) <= 1e-5


def test_ops_that_mix_images_stop_the_prefix(small_sizes, rng):
    g, x = _graph((2, 8, 6, 6))
    a = _op(g, "relu", _conv(g, x, f32(rng, 8, 8, 1, 1)))
    m = _op(g, "reduce", a, mode="mean", axis=0, keepdims=True)   # a mean over the batch
    g.set_outputs([_op(g, "add", a, m)], ["y"])
    count, cut = batch_split.find_cut(g)
    assert (count, cut) == (2, a)                   # before the reduction only


@pytest.mark.parametrize("case", ["batch1", "env_off", "big_cut"])
def test_no_split(case, small_sizes, rng, monkeypatch):
    n = 1 if case == "batch1" else 2
    if case == "env_off":
        monkeypatch.setenv(batch_split.ENV, "0")
    if case == "big_cut":
        monkeypatch.setattr(batch_split, "MAX_CUT_BYTES", 100)
    g, x = _graph((n, 8, 6, 6))
    g.set_outputs([_op(g, "relu", _conv(g, _op(g, "relu", _conv(g, x, f32(rng, 8, 8, 1, 1))),
                                        f32(rng, 8, 8, 1, 1)))], ["y"])
    assert batch_split.split_batch(g) is g


def test_switch_is_part_of_the_compile_cache_key(rng, monkeypatch):
    from megtrace.relay_bridge.compile_cache import entry_key
    from megtrace.relay_bridge.executable import BuildOptions
    from megtrace.relay_bridge.targets import resolve
    g, x = _graph((2, 8, 6, 6))
    g.set_outputs([_conv(g, x, f32(rng, 8, 8, 1, 1))], ["y"])
    on = entry_key(g, resolve(None), None, BuildOptions())
    monkeypatch.setenv(batch_split.ENV, "0")
    assert entry_key(g, resolve(None), None, BuildOptions()) != on
