"""megtrace.amp (MegEngine 1.13's autocast, GradScaler, format marks) against NumPy."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.amp as amp
import megtrace.functional as F
import megtrace.module as M
from megtrace.autodiff import GradManager
from megtrace.core.tensor import amp as core_amp

RNG = np.random.default_rng(0)


def _f16(a):
    return a.astype(np.float16).astype(np.float32)


def test_autocast_matmul_and_linear_run_in_float16():
    a = RNG.standard_normal((4, 8)).astype(np.float32)
    b = RNG.standard_normal((8, 3)).astype(np.float32)
    bias = RNG.standard_normal((3,)).astype(np.float32)
    with amp.autocast():
        y = F.matmul(mge.tensor(a), mge.tensor(b))
        lin = F.linear(mge.tensor(a), mge.tensor(b.T.copy()), mge.tensor(bias))
    assert y.dtype == np.float16 and lin.dtype == np.float16
    ref = (_f16(a) @ _f16(b)).astype(np.float16)       # float32 accumulation
    np.testing.assert_array_equal(y.numpy(), ref)
    ref_lin = (ref.astype(np.float16) + bias.astype(np.float16)).astype(np.float16)
    np.testing.assert_allclose(lin.numpy().astype(np.float32), ref_lin.astype(np.float32),
                               rtol=1e-3, atol=1e-3)


def test_autocast_conv2d_matches_float16_inputs_with_float32_accumulation():
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 1, 1)).astype(np.float32)
    with amp.autocast():
        y = F.conv2d(mge.tensor(x), mge.tensor(w))
    assert y.dtype == np.float16
    ref = np.einsum("nchw,oc->nohw", _f16(x), _f16(w)[:, :, 0, 0]).astype(np.float16)
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref.astype(np.float32),
                               rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("traced", [False, True])
def test_compute_mode_float32_is_what_autocast_computes(traced):
    """MegEngine's amp sets compute_mode FLOAT32 on convolutions and matrix products;
    float16 tensors given compute_mode="float32" by hand get the same float32 sums
    (MegEngine 1.13's test_conv2d_autocast compares the two exactly)."""
    x = RNG.standard_normal((1, 3, 40, 40)).astype(np.float32)
    w = RNG.standard_normal((8, 3, 7, 7)).astype(np.float32)
    a = RNG.standard_normal((16, 300)).astype(np.float32)
    b = RNG.standard_normal((300, 12)).astype(np.float32)

    def by_hand(x, w, a, b):
        h = lambda t: t.astype("float16")
        return (F.conv2d(h(x), h(w), None, 2, 3, compute_mode="float32"),
                F.matmul(h(a), h(b), compute_mode="float32"))
    fn = mge.jit.trace(by_hand, symbolic=True) if traced else by_hand
    args = [mge.tensor(v) for v in (x, w, a, b)]
    with amp.autocast():
        want = (F.conv2d(args[0], args[1], None, 2, 3), F.matmul(args[2], args[3]))
    for _ in range(2 if traced else 1):
        got = fn(*args)
        for g, e in zip(got, want):
            assert g.dtype == e.dtype == np.float16
            if traced:      # TVM's float32 sums run in another order: within 1 float16 ulp
                np.testing.assert_allclose(g.numpy().astype(np.float32),
                                           e.numpy().astype(np.float32), rtol=1e-3, atol=1e-3)
            else:
                np.testing.assert_array_equal(g.numpy(), e.numpy())
    ref = (_f16(a).astype(np.float64) @ _f16(b)).astype(np.float16)   # float64 sums
    np.testing.assert_allclose(got[1].numpy().astype(np.float32), ref.astype(np.float32),
                               rtol=1e-3, atol=0)


def test_precision_sensitive_ops_run_in_high_precision():
    x = mge.tensor(np.array([0.5, 1.5], np.float16))
    with amp.autocast():
        assert F.exp(x).dtype == np.float32
        assert F.log(x).dtype == np.float32
        assert (x / x).dtype == np.float32
        assert (x + x).dtype == np.float16           # not on the list: unchanged
    assert F.exp(x).dtype == np.float16              # outside: no autocast


def test_autocast_restores_state_and_works_as_decorator():
    assert not amp.enabled and amp.low_prec_dtype == "float16"
    with amp.autocast(low_prec_dtype="float16", high_prec_dtype="float32"):
        assert amp.enabled and core_amp._enabled and core_amp._get_amp_dtype_autocast()
        assert mge.config._compute_mode == "float32"
    assert not amp.enabled and not core_amp._get_amp_dtype_autocast()
    assert mge.config._compute_mode == "default"

    @amp.autocast()
    def f(a, b):
        return F.matmul(a, b)
    out = f(mge.tensor(np.ones((2, 2), np.float32)), mge.tensor(np.ones((2, 2), np.float32)))
    assert out.dtype == np.float16 and not amp.enabled
    with amp.autocast(enabled=False):
        assert not amp.enabled


def test_enabled_property_sets_both_switches():
    try:
        amp.enabled = True
        assert core_amp._enabled and core_amp._get_amp_dtype_autocast()
        amp.low_prec_dtype = "float16"
        with pytest.raises(ValueError):
            amp.low_prec_dtype = "int8"
    finally:
        amp.enabled = False
    assert not core_amp._get_amp_dtype_autocast()


def test_batch_norm_under_autocast_float16_data_float32_statistics():
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    bn = M.BatchNorm2d(3)
    with amp.autocast():
        y = bn(mge.tensor(x))
    assert y.dtype == np.float16
    assert bn.running_mean.dtype == np.float32
    xh = _f16(x)
    mean = xh.mean(axis=(0, 2, 3), keepdims=True)
    var = xh.var(axis=(0, 2, 3), keepdims=True)
    ref = (xh - mean) / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3)
    n = x.size // 3
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * var * n / (n - 1),
                               rtol=1e-5)


def test_batch_norm_float16_input_keeps_its_dtype():
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float16)
    w = mge.tensor(np.ones((1, 3, 1, 1), np.float32))
    b = mge.tensor(np.zeros((1, 3, 1, 1), np.float32))
    y = F.batch_norm(mge.tensor(x), weight=w, bias=b, training=True, inplace=False)
    assert y.dtype == np.float16
    xf = x.astype(np.float32)
    ref = (xf - xf.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(
        xf.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3)


def test_grad_scaler_scales_then_unscales():
    x = mge.Parameter(np.array([1.0, 2.0], np.float32))
    gm = GradManager().attach([x])
    scaler = amp.GradScaler(init_scale=8.0, growth_interval=2)
    for step in range(2):
        with gm:
            loss = (x * x).sum()
            scaler.backward(gm, loss, unscale_grad=False)
        np.testing.assert_allclose(x.grad.numpy(), 8.0 * 2 * x.numpy())
        scaler.unscale(gm.attached_tensors())
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy())
        scaler.update()
        x.grad = None
    assert scaler.scale_factor == 16.0 and scaler._growth_tracker == 0


def test_grad_scaler_drops_non_finite_gradients_and_backs_off():
    x = mge.Parameter(np.array([0.0, 2.0], np.float32))
    gm = GradManager().attach([x])
    scaler = amp.GradScaler(init_scale=4.0)
    with gm:
        scaler.backward(gm, F.sqrt(x).sum())     # d sqrt at 0: inf
    assert x.grad is None and scaler.scale_factor == 2.0
    state = scaler.state_dict()
    other = amp.GradScaler()
    other.load_state_dict(state)
    assert other.state_dict() == state == {"scale_factor": 2.0, "growth_factor": 2.0,
                                           "backoff_factor": 0.5, "growth_interval": 2000,
                                           "_growth_tracker": 0}


def test_check_non_finite_scales_in_place_once():
    from megtrace.functional.math import _check_non_finite
    a = mge.tensor(np.array([1.0, 2.0], np.float32))
    flag = _check_non_finite([a, a], 0.5)
    assert int(flag.numpy()) == 0
    np.testing.assert_array_equal(a.numpy(), [0.5, 1.0])
    b = mge.tensor(np.array([np.nan], np.float32))
    assert int(_check_non_finite([a, b]).numpy()) == 1


def test_convert_format_marks_and_propagates():
    conv = M.Conv2d(3, 4, 3, padding=1)
    m = amp.convert_module_format(conv, inplace=False)
    assert m.weight.format == "nhwc" and conv.weight.format == "default"
    assert m.weight.shape == (4, 3, 3, 3)
    x = amp.convert_tensor_format(mge.tensor(np.ones((1, 3, 5, 5), np.float32)))
    y = F.relu(m(x))
    assert y.format == "nhwc"
    np.testing.assert_allclose(y.numpy(), F.relu(conv(mge.tensor(np.ones((1, 3, 5, 5),
                                                                       np.float32)))).numpy())
    assert F.flatten(y, 1).format == "default"
    v = mge.tensor(np.ones((3,), np.float32))
    assert amp.convert_tensor_format(v) is v and v.format == "default"


class _Net(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 8, 3, padding=1)
        self.bn = M.BatchNorm2d(8)
        self.fc = M.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(F.flatten(F.relu(self.bn(self.conv(x))), 1))


def _amp_step(net, scaler):
    import megtrace.optimizer as optim
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    @amp.autocast()
    def step(x, y):
        with gm:
            logits = net(x)
            loss = F.nn.cross_entropy(logits, y)
            scaler.backward(gm, loss)
        opt.step().clear_grad()
        return loss, logits
    return step


def test_amp_training_matches_megengine():
    """3 SGD steps under autocast with a GradScaler, as real MegEngine 1.13 ran them
    (tests/data/make_megengine_amp_training.py): float16 activations, float32 weights."""
    from pathlib import Path
    d = np.load(Path(__file__).parent / "data" / "megengine_amp_training.npz")
    net = _Net()
    net.load_state_dict({k[5:]: d[k] for k in d.files if k.startswith("init/")}, strict=False)
    scaler = amp.GradScaler(init_scale=1024.0, growth_interval=2)
    step = _amp_step(net, scaler)
    x, y = mge.tensor(d["x"]), mge.tensor(d["y"])
    losses = []
    for _ in range(3):
        loss, logits = step(x, y)
        losses.append(float(loss.numpy()))
    assert str(logits.dtype) == str(d["logits_dtype"])
    np.testing.assert_allclose(losses, d["losses"], rtol=2e-3)
    assert scaler.scale_factor == float(d["scale_factor"])
    for k, v in net.state_dict().items():
        np.testing.assert_allclose(np.asarray(v), d[f"final/{k}"], rtol=1e-2, atol=2e-3,
                                   err_msg=k)


def test_traced_amp_step_equals_eager():
    """The same autocast step traced (a fixed scale: a changing factor is a constant of
    the trace, which MegEngine's replay check refuses too)."""
    from megtrace.jit import trace
    rng = np.random.default_rng(5)
    x = mge.tensor(rng.random((4, 3, 8, 8)).astype(np.float32))
    y = mge.tensor(np.array([1, 2, 3, 4], np.int32))
    nets = [_Net(), _Net()]
    nets[1].load_state_dict(nets[0].state_dict())
    eager = _amp_step(nets[0], amp.GradScaler(init_scale=64.0, growth_interval=0))
    traced = trace(_amp_step(nets[1], amp.GradScaler(init_scale=64.0, growth_interval=0)),
                   symbolic=True)
    for _ in range(3):
        (le, ge), (lt, gt) = eager(x, y), traced(x, y)
        assert gt.dtype == ge.dtype == np.float16
        # float16 results of TVM's kernels and NumPy's may differ by an ulp or two
        np.testing.assert_allclose(lt.numpy(), le.numpy(), rtol=5e-3)
    for (k, a), (_, b) in zip(nets[0].state_dict().items(), nets[1].state_dict().items()):
        # (conv.bias's gradient is float16 noise around 0: BatchNorm removes it)
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-3, atol=1e-3,
                                   err_msg=k)


@pytest.mark.parametrize("optimize", [False, True])
def test_autocast_dump_runs_in_lite_with_float32_sums(lite, tmp_path, optimize):
    """Dumped under autocast, convolutions and matrix products keep compute_mode FLOAT32
    (as MegEngine writes them), so Lite's float16 kernels sum in float32 and agree with
    megtrace's eager result exactly."""
    from megtrace.fbs.reader import read_model
    from megtrace.jit import trace
    conv, fc = M.Conv2d(3, 8, 3, padding=1), M.Linear(8 * 36, 5)

    @amp.autocast()
    def f(x):
        return fc(F.flatten(F.relu(conv(x)), 1)).astype("float32")

    x = RNG.random((2, 3, 6, 6)).astype(np.float32)
    want = f(mge.tensor(x)).numpy()
    traced = trace(f, symbolic=True, capture_as_const=True)
    traced(mge.tensor(x))
    path = tmp_path / "amp.mge"
    traced.dump(str(path), arg_names=["x"], output_names=["y"],
                optimize_for_inference=optimize)
    modes = {o.type: dict(o.params)[o.type if o.type == "Convolution" else "MatrixMul"]
             ["compute_mode"] for o in read_model(path.read_bytes()).oprs
             if o.type in ("Convolution", "MatrixMulV2")}
    assert modes == {"Convolution": "FLOAT32", "MatrixMulV2": "FLOAT32"}
    np.testing.assert_array_equal(lite.run_model(path, {"x": x})["y"], want)


def test_group_norm_runs_in_high_precision_under_autocast():
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float16)
    gn = M.GroupNorm(2, 4)
    with amp.autocast():
        y = gn(mge.tensor(x))
    assert y.dtype == np.float32
    g = x.astype(np.float32).reshape(2, 2, -1)
    ref = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5))
    np.testing.assert_allclose(y.numpy(), ref.reshape(x.shape), rtol=1e-5, atol=1e-5)
