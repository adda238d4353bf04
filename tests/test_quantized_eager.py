"""Quantized dtypes run eagerly as in MegEngine 1.13 (golden data from the real MegEngine:
tests/data/make_quantized_golden.py): TypeCvt, integer ops on stored values, quantized
matmul, F.quantized's convolutions, ElemwiseMultiType and a converted network."""
import pathlib

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.core.tensor import dtype as D
from megtrace.dispatch import apply
from megtrace.functional.elemwise import _elemwise_multi_type
from megtrace.jit import trace
from megtrace.quantization import quantize, quantize_qat
from megtrace.quantization.quantize import disable_observer, enable_observer

GOLD = np.load(pathlib.Path(__file__).parent / "data" / "quantized_golden.npz")
DTYPES = {"qint8": D.qint8(0.5), "quint8": D.quint8(0.05, 128), "qint4": D.qint4(0.5),
          "quint4": D.quint4(0.5, 7), "qint32": D.qint32(0.5), "qint1": D.qint1(0.5)}


def q(name, dtype):
    """A megtrace tensor holding golden stored integers as quantized `dtype`."""
    return mge.tensor(GOLD[name].astype(np.dtype(dtype.str)).view(dtype))


def raw(t):
    arr = t.numpy()
    assert D.is_quantize(arr.dtype), arr.dtype
    return arr.view(np.dtype(arr.dtype.str))


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_typecvt_to_and_from_quantized_matches_megengine(name):
    dt = DTYPES[name]
    qt = mge.tensor(GOLD["cvt_x"]).astype(dt)
    assert qt.dtype.metadata["mgb_dtype"]["name"] == dt.metadata["mgb_dtype"]["name"]
    np.testing.assert_allclose(D.get_scale(qt.dtype), GOLD[f"cvt_{name}_meta"][0], rtol=1e-7)
    np.testing.assert_array_equal(raw(qt), GOLD[f"cvt_{name}"])       # ties round away
    back = qt.astype("float32")
    assert back.dtype == np.float32 and not D.is_quantize(back.dtype)
    np.testing.assert_array_equal(back.numpy(), GOLD[f"cvt_{name}_back"])


def test_requantize_and_integer_casts_match_megengine():
    q8 = mge.tensor(GOLD["cvt_x"]).astype(D.qint8(0.5))
    np.testing.assert_array_equal(raw(q8.astype(D.qint8(0.3))), GOLD["cvt_q8_to_q8"])
    np.testing.assert_array_equal(raw(q8.astype(D.quint8(0.1, 100))), GOLD["cvt_q8_to_quint8"])
    np.testing.assert_array_equal(q8.astype("int32").numpy(), GOLD["cvt_q8_to_int32"])
    q32 = mge.tensor(GOLD["cvt_x"]).astype(D.qint32(0.01))
    np.testing.assert_array_equal(raw(q32.astype(D.qint8(0.07))), GOLD["cvt_q32_to_q8"])
    # Tensor(data, dtype=q) stores data as it is (cast, not quantized), as MegEngine does
    t = mge.tensor(np.array([1.7, -2.2, 3.9], np.float32), dtype=D.qint8(0.1))
    np.testing.assert_array_equal(raw(t), GOLD["new_tensor"])


def test_integer_ops_on_stored_values_match_megengine():
    a, b = q("int_a", D.qint8(0.5)), q("int_b", D.qint8(0.5))
    for name, got in (("add", a + b), ("sub", a - b), ("neg", -a), ("relu", F.relu(a)),
                      ("max", F.maximum(a, b)), ("concat", F.concat([a, b], axis=1)),
                      ("transpose", a.T), ("getitem", a[1:, ::2]),
                      ("pad", F.nn.pad(a, ((1, 1), (2, 0)), mode="reflect"))):
        assert D.get_scale(got.dtype) == 0.5, name
        np.testing.assert_array_equal(raw(got), GOLD[f"int_{name}"], err_msg=name)


def test_mixed_scales_and_missing_kernels_are_refused():
    a = mge.tensor([1.0, 2.0]).astype(D.qint8(0.5))
    with pytest.raises(ValueError, match="different scales"):
        a + mge.tensor([1.0, 2.0]).astype(D.qint8(0.25))
    with pytest.raises(NotImplementedError, match="exp on quantized dtype QuantizedS8"):
        apply("exp", a)


def test_quantized_matmul_gives_qint32_with_the_scale_product():
    a, b = q("mm_a", D.qint8(0.01)), q("mm_b", D.qint8(0.02))
    out = F.matmul(a, b, transpose_b=True)
    assert out.dtype.metadata["mgb_dtype"]["name"] == "QuantizedS32"
    np.testing.assert_allclose(D.get_scale(out.dtype), GOLD["mm_meta"][0], rtol=1e-7)
    np.testing.assert_array_equal(raw(out), GOLD["mm"])


@pytest.mark.parametrize("case", range(3))
def test_conv_bias_activation_matches_megengine(case):
    _n, _ic, _oc, _h, _w, _k, s, p, d, g, mode = [
        (2, 4, 6, 9, 8, 3, 1, 1, 1, 1, "identity"), (1, 6, 4, 10, 7, 3, 2, 0, 1, 2, "relu"),
        (2, 3, 5, 8, 8, 2, 1, 2, 2, 1, "relu")][case]
    x = q(f"conv{case}_x", D.qint8(0.05))
    w = q(f"conv{case}_w", D.qint8(0.01))
    b = q(f"conv{case}_b", D.qint32(0.05 * 0.01))
    y = F.quantized.conv_bias_activation(x, w, b, D.qint8(0.03), stride=s, padding=p,
                                         dilation=d, groups=g, nonlinear_mode=mode)
    np.testing.assert_allclose(D.get_scale(y.dtype), GOLD[f"conv{case}_meta"][0], rtol=1e-7)
    np.testing.assert_array_equal(raw(y), GOLD[f"conv{case}_y"])


def test_batch_conv_bias_and_transposed_conv_match_megengine():
    y = F.quantized.batch_conv_bias_activation(
        q("bconv_x", D.qint8(0.04)), q("bconv_w", D.qint8(0.01)), q("bconv_b", D.qint32(0.0004)),
        dtype=D.qint8(0.02))
    np.testing.assert_array_equal(raw(y), GOLD["bconv_y"])
    y = F.quantized.conv_transpose2d(q("tconv_x", D.qint8(0.05)), q("tconv_w", D.qint8(0.04)),
                                     dtype=D.qint8(0.05), stride=(2, 1), padding=(1, 0))
    np.testing.assert_array_equal(raw(y), GOLD["tconv_y"])


@pytest.mark.parametrize("mode", ["qadd", "qsub", "qmul", "qfuse_add_relu", "qfuse_add_tanh",
                                  "qabs", "qsin", "qcos", "qrelu"])
def test_elemwise_multi_type_matches_megengine(mode):
    a, b = q("emt_a", D.qint8(0.03)), q("emt_b", D.qint8(0.02))
    args = (a, b) if mode in ("qadd", "qsub", "qmul", "qfuse_add_relu", "qfuse_add_tanh") else (a,)
    got = raw(_elemwise_multi_type(*args, mode=mode, dtype=D.qint8(0.025)))
    # float32 transcendental functions may differ in the last bit between libms
    np.testing.assert_allclose(got, GOLD[f"emt_{mode}"], atol=1 if mode in
                               ("qsin", "qcos", "qfuse_add_tanh") else 0)


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.conv = M.ConvBnRelu2d(3, 4, 3, padding=1)
        self.conv2 = M.Conv2d(4, 4, 3, padding=1, padding_mode="reflect")
        self.linear = M.LinearRelu(4 * 6 * 6, 5)
        self.cat = M.Concat()
        self.add = M.Elemwise("add")
        self.dequant = M.DequantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.conv2(self.conv(x))
        y = self.linear(F.flatten(x, 1))
        y = self.cat([y, y], 1)
        return self.dequant(self.add(y, y))


def test_converted_network_runs_as_megengine_runs_it():
    net = Net()
    net.load_state_dict({k[len("net_init."):]: GOLD[k] for k in GOLD.files
                         if k.startswith("net_init.")})
    net.eval()
    quantize_qat(net)
    enable_observer(net)
    for xb in GOLD["net_calib"]:
        net(mge.tensor(xb))
    disable_observer(net)
    x = mge.tensor(GOLD["net_x"])
    np.testing.assert_allclose(net(x).numpy(), GOLD["net_qat_y"], rtol=1e-5, atol=1e-5)
    quantize(net)
    net.eval()
    y = net(x).numpy()
    # The output scale comes from observers of float convolutions, whose summation order
    # follows the BLAS kernel NumPy picks for the host and its threads (OpenBLAS's
    # Haswell and SkylakeX kernels give scales 2 ulp apart); one quantization step off
    # would be a relative error of ~1e-2, not 1e-6.
    np.testing.assert_allclose(y, GOLD["net_q_y"], rtol=2e-6, atol=0)


class BmmNet(M.Module):
    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.bmm = M.BatchMatMulActivation(3, 8, 4, bias=True, nonlinear_mode="relu")
        self.dequant = M.DequantStub()

    def forward(self, x):
        return self.dequant(self.bmm(self.quant(x)))


def test_batch_matmul_activation_float_and_converted_match_megengine():
    net = BmmNet()
    net.load_state_dict({k[len("bmm_init."):]: GOLD[k] for k in GOLD.files
                         if k.startswith("bmm_init.")})
    x = mge.tensor(GOLD["bmm_x"])
    np.testing.assert_allclose(net(x).numpy(), GOLD["bmm_float_y"], rtol=1e-5, atol=1e-6)
    net.eval()
    quantize_qat(net)
    enable_observer(net)
    net(x)
    disable_observer(net)
    quantize(net)
    net.eval()
    assert type(net.bmm).__module__.endswith("quantized.batch_matmul_activation")
    # megtrace accumulates exactly; MegEngine's x86 BatchConvBias kernel (u8 x s8 pairs
    # summed in int16) saturates on rare large products: at most one output step apart
    # in a few places (our exact sum is checked against NumPy below)
    y, want = net(x).numpy(), GOLD["bmm_q_y"]
    step = D.get_scale(net.bmm.output_dtype)
    np.testing.assert_allclose(y, want, atol=step * 1.01)
    assert np.mean(y == want) > 0.95
    xq = x.astype(net.quant.output_dtype).numpy().view(np.int8).astype(np.int64)
    w = net.bmm.weight.numpy().view(np.int8).astype(np.int64)[..., 0, 0]
    acc = np.einsum("noi,nik->nok", w, xq)
    b = net.bmm.bias.numpy().reshape(1, -1, 1)
    xs, ws = D.get_scale(net.quant.output_dtype), D.get_scale(net.bmm.weight.dtype)
    ref = np.round(acc * np.float64(xs * ws) / step + np.round(b / (xs * ws)) * (xs * ws) / step)
    np.testing.assert_allclose(y / step, np.clip(ref, -128, 127), atol=1.01)


def test_one_quantized_operand_converts_the_other_as_megengine_does():
    q32 = mge.tensor(np.array([10.0, -4.0, 3.3], np.float32)).astype(D.qint32(0.5))
    q8 = mge.tensor(np.array([10.0, -4.0, 3.3], np.float32)).astype(D.qint8(0.5))
    f = mge.tensor(np.array([5.0, 1.25, -0.75], np.float32))
    for name, got in (("q32_plus_f", q32 + f), ("f_plus_q32", f + q32),
                      ("q32_plus_int", q32 + 1), ("q32_plus_float", q32 + 1.5),
                      ("q8_plus_i32", q8 + mge.tensor(np.array([5, 1, -2], np.int32)))):
        np.testing.assert_array_equal(raw(got), GOLD[f"mix_{name}"], err_msg=name)


def test_quantized_pooling_and_nearest_resize_match_megengine():
    x, ties = q("pool_x", D.qint8(0.1)), q("pool_ties", D.qint8(1.0))
    for name, got in (("max", F.max_pool2d(x, 2)), ("avg", F.avg_pool2d(x, 3, 2, 1)),
                      ("avg_incl", F.avg_pool2d(x, 3, 1, 1, mode="average")),
                      ("adaptive_avg", F.adaptive_avg_pool2d(x, (2, 3))),
                      ("adaptive_max", F.adaptive_max_pool2d(x, 2)),
                      ("nearest", F.nn.interpolate(x, scale_factor=2, mode="nearest")),
                      ("ties_avg", F.avg_pool2d(ties, 2)),
                      ("ties_avg_pad", F.avg_pool2d(ties, 2, 2, 1))):
        assert D.get_scale(got.dtype) == D.get_scale((ties if "ties" in name else x).dtype)
        np.testing.assert_array_equal(raw(got), GOLD[f"pool_{name}"], err_msg=name)


# -- more modes (tests/data/make_megengine_quantized_modes.py) ------------------------------
MODES_GOLD = np.load(pathlib.Path(__file__).parent / "data" / "quantized_modes.npz")
_MODE_ARGS = {"qh_swish": "x", "qfuse_mul_add3": "xyz", "qfloor": "x", "qceil": "x",
              "qround": "x", "qlog": "p", "qpow": "py", "qfast_tanh": "x", "qerf": "x",
              "qfuse_add_h_swish": "xy", "qcond_leq_mov": "xyz"}


def _mode_operand(key):
    name, scale = {"x": ("emt_x", 0.05), "y": ("emt_y", 0.03), "z": ("emt_z", 0.02),
                   "p": ("emt_pos", 0.05)}[key]
    return mge.tensor(MODES_GOLD[name].view(D.qint8(scale)))


@pytest.mark.parametrize("mode", sorted(_MODE_ARGS))
def test_more_elemwise_multi_type_modes_match_megengine_on_every_int8(mode):
    """Every qint8 value through the mode (qh_swish of MobileNetV3-style nets included):
    dequantized, MegEngine's float32 Elemwise, quantized."""
    args = [_mode_operand(k) for k in _MODE_ARGS[mode]]
    got = raw(_elemwise_multi_type(*args, mode=mode, dtype=D.qint8(0.04)))
    # float32 transcendental functions may differ in the last bit between libms
    np.testing.assert_allclose(got, MODES_GOLD[f"emt_{mode}"],
                               atol=1 if mode in ("qlog", "qpow", "qerf") else 0)


def test_quantized_h_swish_module_is_its_qat_output():
    net = quantize_qat(M.Sequential(M.QuantStub(), M.Elemwise("h_swish"), M.DequantStub()))
    x = mge.tensor(np.linspace(-4, 4, 24, dtype=np.float32).reshape(2, 3, 4))
    net(x)
    net.eval()
    want = net(x).numpy()
    z = quantize(net)
    z.eval()
    np.testing.assert_array_equal(z(x).numpy(), want)


def test_float_fused_elemwise_modes_match_megengine():
    """fuse_add_h_swish (MegEngine's CPU kernel rounds h_swish one way in SIMD lanes and
    another in the tail: within an ulp), cond_leq_mov (x <= y ? z : 0) and fast_tanh."""
    x, y, z = (mge.tensor(MODES_GOLD[f"float_{k}"]) for k in "xyz")
    np.testing.assert_allclose(M.Elemwise("fuse_add_h_swish")(x, y).numpy(),
                               MODES_GOLD["float_fuse_add_h_swish"], rtol=3e-7, atol=1e-7)
    np.testing.assert_array_equal(M.Elemwise("cond_leq_mov")(x, y, z).numpy(),
                                  MODES_GOLD["float_cond_leq_mov"])
    np.testing.assert_array_equal(M.Elemwise("fast_tanh")(x).numpy(),
                                  MODES_GOLD["float_fast_tanh"])
    np.testing.assert_allclose(M.Elemwise("fuse_add_h_swish")(
        mge.tensor([1.0, -2.0, 3.0]), mge.tensor(0.5)).numpy(), [1.125, -0.375, 3.5])


def test_float_fused_modes_gradients():
    """MegEngine's rules: H_SWISH_GRAD of x + y for both inputs of fuse_add_h_swish;
    cond_leq_mov passes z's gradient where x <= y and none to x and y."""
    from megtrace.autodiff import GradManager
    x, y, z = (mge.Parameter(MODES_GOLD[f"float_{k}"]) for k in "xyz")
    gm = GradManager().attach([x, y, z])
    with gm:
        gm.backward((M.Elemwise("fuse_add_h_swish")(x, y)
                     + M.Elemwise("cond_leq_mov")(x, y, z)).sum())
    s = (x + y).numpy()
    dh = np.where(s < -3, 0, np.where(s > 3, 1, (2 * s + 3) / 6))
    np.testing.assert_allclose(x.grad.numpy(), dh, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(y.grad.numpy(), dh, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(z.grad.numpy(), (x.numpy() <= y.numpy()).astype(np.float32))


@pytest.mark.parametrize("key,kwargs,out_scale", [
    ("conv_h_swish", dict(padding=1, nonlinear_mode="h_swish"), 0.03),
    ("conv_h_swish_nobias_stride2", dict(stride=2, nonlinear_mode="H_SWISH"), 0.02),
    ("conv_convolution", dict(padding=1, conv_mode="convolution"), 0.03),
    ("conv_cross_correlation", dict(padding=1), 0.03)])
def test_conv_bias_h_swish_and_convolution_mode_match_megengine(key, kwargs, out_scale):
    """h_swish: MegEngine's CPU epilogue (float32 h_swish of the dequantized accumulator and
    bias, times the reciprocal of the output scale); conv_mode="convolution": MegEngine's
    CPU kernels compute the same cross-correlation."""
    x = mge.tensor(MODES_GOLD["conv_x"].view(D.qint8(0.05)))
    w = mge.tensor(MODES_GOLD["conv_w"].view(D.qint8(0.01)))
    bias = MODES_GOLD["conv_b"] if "nobias" not in key else np.zeros((1, 4, 1, 1), np.int32)
    b = mge.tensor(bias.view(D.qint32(0.0005)))
    y = F.quantized.conv_bias_activation(x, w, b, D.qint8(out_scale), **kwargs)
    np.testing.assert_array_equal(raw(y), MODES_GOLD[key])


def test_tensor_dtypes_hold_float32_scales_as_megengine_tensors_do():
    """tests/data/show_megengine_quantized_dtype_facts.py: qint8(0.1) keeps 0.1, a tensor's
    dtype the float32 value (whether made by astype or from an array of that dtype)."""
    f32 = float(np.float32(0.1))
    assert D.get_scale(D.qint8(0.1)) == 0.1 and D.quint8(0.1, 3).metadata["mgb_dtype"] == {
        "name": "Quantized8Asymm", "scale": 0.1, "zero_point": 3}
    t = mge.tensor(np.array([0.3, 0.5], np.float32)).astype(D.qint8(0.1))
    assert D.get_scale(t.dtype) == D.get_scale(t.numpy().dtype) == f32 != 0.1
    u = mge.tensor(np.array([3, 5], np.int8).view(D.qint8(0.1)))
    assert D.get_scale(u.dtype) == f32 and u.numpy().tolist() == [3, 5]
    assert not D.is_dtype_equal(t.dtype, D.qint8(0.1)) and t.dtype == D.qint8(0.1)
    assert D.is_dtype_equal(t.dtype, D.qint8(f32))


def test_full_reduction_of_a_quantized_tensor_is_0_d():
    q = mge.tensor(np.arange(6, dtype=np.float32) / 10).astype(D.qint8(0.1))
    assert [r.shape for r in (q.sum(), q.max(), q.min(), F.sum(q), F.max(q),
                              F.sum(q, axis=0))] == [()] * 6
    assert F.sum(q.reshape(2, 3), axis=1, keepdims=True).shape == (2, 1)
    assert float(q.sum().astype("float32").numpy()) == pytest.approx(1.5)
    assert D.get_scale(q.max().dtype) == float(np.float32(0.1))


def test_is_lowbit_as_megengine():
    assert not D.is_lowbit(D.qint4(0.1)) and not D.is_lowbit(D.qint8(0.1))
    assert not D.is_lowbit(np.int8)
