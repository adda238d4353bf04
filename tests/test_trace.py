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
    assert infer._compiled is not None
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


def test_capture_as_const_freezes_parameters(rng):
    net = MLP()
    x = _inputs(rng, (2, 64))

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    before = infer(x).numpy()
    net.fc3.bias._set_value(net.fc3.bias.numpy() + 1.0)
    assert rel_err(infer(x).numpy(), before) <= 1e-6


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
    @trace(symbolic=True, capture_as_const=True)
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


def test_symbolic_value_is_unreadable_inside_trace(rng):
    @trace(symbolic=True)
    def f(x):
        y = F.relu(x)
        y.numpy()
        return y

    with pytest.raises(mge.TraceError, match="value unreadable"):
        f(_inputs(rng, (2,)))


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
