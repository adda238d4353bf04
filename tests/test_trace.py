"""trace: traced-and-compiled results vs eager, both recording modes, and bad input."""
import numpy as np
import pytest
from conftest import rel_err
from models import MLP, ConvNet, GapNet, randomize_bn

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _inputs(rng, shape):
    return mge.tensor(rng.uniform(-1, 1, size=shape).astype(np.float32))


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("model,shape", [(MLP, (4, 64)), (ConvNet, (2, 3, 32, 32)),
                                         (GapNet, (2, 3, 16, 16))],
                         ids=["mlp", "convnet", "gapnet"])
def test_traced_matches_eager(model, shape, symbolic, rng):
    net = randomize_bn(model(), rng).eval()
    x = _inputs(rng, shape)
    want = net(x).numpy()

    @trace(symbolic=symbolic, capture_as_const=True)
    def infer(data):
        return net(data)

    first = infer(x).numpy()
    second = infer(x).numpy()                 # runs the TVM-compiled graph
    assert next(iter(infer._entries.values())).compiled is not None
    assert rel_err(first, want) <= 1e-5
    assert rel_err(second, want) <= 1e-5
    x2 = _inputs(rng, shape)
    assert rel_err(infer(x2).numpy(), net(x2).numpy()) <= 1e-5


def test_graph_text_form(rng):
    net = ConvNet().eval()

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    infer(_inputs(rng, (1, 3, 32, 32)))
    text = str(infer.graph)
    assert text.startswith("graph(%arg_0: f32[1,3,32,32]) {")
    assert "= conv2d(%arg_0, %c0, stride=(1, 1), padding=(1, 1)" in text
    assert "# conv.weight" in text and "# bn.running_var" in text
    assert "f32[1,4096] = flatten(" in text
    assert text.rstrip().endswith("return %7 as 'output_0'\n}")
    infer.graph.verify()


def test_without_capture_as_const_parameters_are_inputs(rng):
    net = MLP()
    x = _inputs(rng, (2, 64))

    @trace(symbolic=True)
    def infer(data):
        return net(data)

    before = infer(x).numpy()
    net.fc3.bias._set_value(net.fc3.bias.numpy() + 1.0)   # an optimizer step, say
    after = infer(x).numpy()
    assert rel_err(after, before + 1.0) <= 1e-5


def test_capture_as_const_changed_parameter_raises(rng):
    net = MLP()
    x = _inputs(rng, (2, 64))

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    infer(x)
    infer(x)
    net.fc3.bias._set_value(net.fc3.bias.numpy() + 1.0)
    with pytest.raises(mge.TraceError, match="tensors not equals: fc3.bias"):
        infer(x)


def test_without_host_skips_python_and_keeps_frozen_parameters(rng):
    net = MLP()
    x = _inputs(rng, (2, 64))
    calls = []

    @trace(symbolic=True, capture_as_const=True, without_host=True)
    def infer(data):
        calls.append(1)
        return net(data)

    before = infer(x).numpy()
    net.fc3.bias._set_value(net.fc3.bias.numpy() + 1.0)
    after = infer(x).numpy()
    assert len(calls) == 1                      # Python ran only while tracing
    assert rel_err(after, before) <= 1e-6      # the frozen graph ignores the update


def test_bare_decorator_and_multiple_outputs(rng):
    @trace
    def f(a, b):
        return {"sum": a + b, "prod": F.relu(a * b)}

    a, b = _inputs(rng, (3, 4)), _inputs(rng, (3, 4))
    f(a, b)
    out = f(a, b)
    assert set(out) == {"sum", "prod"}
    assert rel_err(out["sum"].numpy(), a.numpy() + b.numpy()) <= 1e-6
    assert rel_err(out["prod"].numpy(), np.maximum(a.numpy() * b.numpy(), 0)) <= 1e-6


def test_scalar_and_dtype_promotion(rng):
    a = mge.tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert (a + 1).dtype == np.int32
    assert (a * 0.5).dtype == np.float32
    assert (a / 2).dtype == np.float32
    np.testing.assert_allclose((a / 2).numpy(), np.arange(6).reshape(2, 3) / 2)


def test_wrong_dtype_raises_trace_error(rng):
    @trace(symbolic=True, capture_as_const=True)
    def f(x):
        return F.relu(x)

    f(_inputs(rng, (2, 3)))
    with pytest.raises(mge.TraceError, match="dtype mismatch: float32 vs int32"):
        f(mge.tensor(np.zeros((2, 3), np.int32)))


def test_wrong_shape_raises_trace_error(rng):
    @trace(symbolic=True, capture_as_const=True, symbolic_shape=False)
    def f(x):
        return F.relu(x)

    f(_inputs(rng, (2, 3)))
    with pytest.raises(mge.TraceError, match=r"shape mismatch: input arg_0 .*\(2, 3\), got \(4, 3\)"):
        f(_inputs(rng, (4, 3)))


def test_non_tensor_argument_with_capture_as_const(rng):
    @trace(capture_as_const=True)
    def f(x, scale):
        return x * scale

    with pytest.raises(mge.TraceError, match="Only support tensor type args"):
        f(_inputs(rng, (2,)), 3.0)


@pytest.mark.parametrize("symbolic", [False, True])
def test_values_read_while_tracing_stay_readable(symbolic, rng):
    seen = []
    read_late = {"on": False}

    @trace(symbolic=symbolic)
    def f(x):
        y = F.relu(x)
        seen.append(float(F.sum(y).numpy()))      # read while tracing: kept by the graph
        z = y * 2
        if read_late["on"]:
            y.numpy()                              # never read while tracing
        return z

    x = _inputs(rng, (4,))
    f(x)
    x2 = _inputs(rng, (4,))
    f(x2)
    assert seen[1] == pytest.approx(float(np.maximum(x2.numpy(), 0).sum()), rel=1e-5)
    read_late["on"] = True
    with pytest.raises(mge.TraceError, match="value unreadable"):
        f(x2)


def test_record_only_cannot_run(rng, tmp_path):
    net = MLP().eval()

    @trace(record_only=True)
    def infer(data):
        return net(data)

    out = infer(_inputs(rng, (1, 64)))
    with pytest.raises(mge.TraceError, match="value unreadable"):
        out.numpy()
    infer.dump(tmp_path / "m.mge", arg_names=["data"])
    assert (tmp_path / "m.mge").stat().st_size > 0


def test_replay_detects_operator_mismatch(rng):
    flag = {"relu": True}

    @trace(symbolic=True)
    def f(x):
        return F.relu(x) if flag["relu"] else F.sigmoid(x)

    x = _inputs(rng, (3,))
    f(x)
    f(x)
    flag["relu"] = False
    with pytest.raises(mge.TraceError, match="operator mismatch: traced relu, now sigmoid"):
        f(x)


def test_replay_detects_changed_parameters_and_early_end(rng):
    state = {"axis": 0, "extra": True}

    @trace
    def f(x):
        y = F.sum(x, axis=state["axis"])
        return F.relu(y) if state["extra"] else y

    x = _inputs(rng, (2, 3))
    f(x)
    state["axis"] = 1
    with pytest.raises(mge.TraceError, match="operator mismatch: reduce parameters changed"):
        f(x)
    state.update(axis=0, extra=False)
    with pytest.raises(mge.TraceError, match="mismature end"):
        f(x)


def test_constant_created_inside_changed(rng):
    scale = {"v": 2.0}

    @trace(symbolic=True)
    def f(x):
        return x * mge.tensor(np.full((3,), scale["v"], np.float32))

    x = _inputs(rng, (3,))
    f(x)
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * 2, rtol=1e-6)
    scale["v"] = 3.0
    with pytest.raises(mge.TraceError, match="tensors not equals"):
        f(x)


def test_symbolic_shape_retraces_per_shape_and_static_shape_refuses(rng):
    net = ConvNet().eval()
    runs = []

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        runs.append(data.shape)
        return net(data)

    for batch in (1, 8, 1):
        x = _inputs(rng, (batch, 3, 32, 32))
        assert rel_err(infer(x).numpy(), net(x).numpy()) <= 1e-5
    assert len(infer._entries) == 2

    @trace(symbolic=True, capture_as_const=True, symbolic_shape=False)
    def fixed(data):
        return net(data)

    fixed(_inputs(rng, (1, 3, 32, 32)))
    with pytest.raises(mge.TraceError, match="shape mismatch.*symbolic_shape=False"):
        fixed(_inputs(rng, (8, 3, 32, 32)))


def test_trace_option_validation():
    from megtrace.jit import DTRConfig, GraphOptimizationConfig, SublinearMemoryConfig
    assert DTRConfig(eviction_threshold=1).eviction_threshold == 1
    with pytest.raises(ValueError, match="evictee_minimum_size"):
        DTRConfig(eviction_threshold=1, evictee_minimum_size=-1)
    with pytest.raises(ValueError, match="num_worker"):
        SublinearMemoryConfig(num_worker=0)
    assert "jit_fuse_reduce = UNSET" in repr(GraphOptimizationConfig())
    with pytest.raises(TypeError, match="dtr_config must be a DTRConfig"):
        trace(lambda x: x, dtr_config={"eviction_threshold": 1})
    with pytest.raises(ValueError, match="opt_level"):
        trace(lambda x: x, opt_level=7)


def test_profiling_reports_per_kernel_timings(rng):
    net = ConvNet().eval()

    @trace(symbolic=True, capture_as_const=True, profiling=True)
    def infer(data):
        return net(data)

    assert infer.get_profile()["profiler"]["device"] == {}
    x = _inputs(rng, (1, 3, 32, 32))
    infer(x)
    infer(x)
    prof = infer.get_profile()
    records = prof["profiler"]["device"]
    assert records and len(prof["graph_exec"]["kernels"]) == len(records)
    for rec in records.values():
        (timing,) = rec.values()
        assert 0 <= timing["start"] <= timing["end"]
    assert any("conv" in name for name in prof["graph_exec"]["kernels"])
    with pytest.raises(mge.TraceError, match="profiling=True"):
        trace(lambda v: v).get_profile()


def test_memory_configs_leave_a_graph_without_backward_unchanged(rng):
    """Nothing to recompute in a forward-only function: the graph stays as traced
    (tests/test_memory_options.py: training steps)."""
    from megtrace.jit import DTRConfig, SublinearMemoryConfig
    f = trace(lambda x: x * 2, dtr_config=DTRConfig(eviction_threshold=1 << 30))
    assert f.dtr_config.eviction_threshold == 1 << 30
    g = trace(lambda x: F.exp(x * 2) + 1, sublinear_memory_config=SublinearMemoryConfig())
    x = _inputs(rng, (3,))
    assert rel_err(f(x).numpy(), x.numpy() * 2) <= 1e-6
    assert rel_err(g(x).numpy(), np.exp(x.numpy() * 2) + 1) <= 1e-6
    (graph, _), = [e.compiled for e in g._entries.values()]
    assert [n.op.name for n in graph.nodes] == [n.op.name for n in g.graph.nodes]


def _kernels(f):
    (graph, compiled), = [e.compiled for e in f._entries.values()]
    return compiled.kernels


def test_opt_level_changes_the_build(rng):
    x = _inputs(rng, (8, 16, 32))

    def body(v):
        return F.sum(F.relu(F.exp(v).transpose(0, 2, 1)) ** 2, axis=2)

    want = body(x).numpy()
    counts = {}
    for level in (0, 1, 2, -2):
        f = trace(body, symbolic=True, opt_level=level)
        assert rel_err(f(x).numpy(), want) <= 1e-5
        counts[level] = len(_kernels(f))
    assert counts[0] > counts[1] >= counts[2]      # level 0 does not fuse


def test_graph_opt_config_controls_fusion(rng):
    from megtrace.jit import GraphOptimizationConfig
    x = _inputs(rng, (8, 16, 32))

    def body(v):
        return F.sum(F.relu(F.exp(v).transpose(0, 2, 1)) * 2, axis=2)

    def kernels(**flags):
        cfg = GraphOptimizationConfig()
        for k, v in flags.items():
            setattr(cfg, k, v)
        f = trace(body, symbolic=True, graph_opt_config=cfg)
        assert rel_err(f(x).numpy(), body(x).numpy()) <= 1e-5
        return _kernels(f)

    default = kernels()
    no_transpose = kernels(jit_fuse_dimshuffle=False)
    no_reduce = kernels(jit_fuse_reduce=False)
    assert "transpose" in no_transpose and "transpose" not in default
    assert "sum" in no_reduce and "sum" not in default
