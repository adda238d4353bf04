"""Quantization-aware training against real MegEngine 1.13 (golden data made by
tests/data/make_qat_golden.py): fake quantization forward and gradients, observers, a
QAT network trained eagerly and traced, and `quantize`'s conversion."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.autodiff import GradManager
from megtrace.core.tensor import dtype as qdtype
from megtrace.quantization import (ExponentialMovingAverageObserver, MinMaxObserver, QuantMode,
                                   create_qparams, disable_observer, quantize, quantize_qat,
                                   tqt_qconfig)
from megtrace.quantization.utils import fake_quant_tensor, lsq_forward, tqt_forward

GOLD = np.load(pathlib.Path(__file__).parent / "data" / "qat_golden.npz")
WEIGHTS = np.arange(24, dtype="float32").reshape(4, 6)


def _grads(fn, *arrays):
    ts = [mge.Parameter(a) for a in arrays]
    gm = GradManager().attach(ts)
    with gm:
        y = fn(*ts)
        gm.backward((y * mge.tensor(WEIGHTS)).sum())
    return y.numpy(), [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("name, meta, mode, zp", [
    ("s8", "qint8", QuantMode.SYMMERTIC, None),
    ("u8", "quint8", QuantMode.ASYMMERTIC, 100.0)])
def test_fake_quant_forward_and_gradient(name, meta, mode, zp):
    def fn(x):
        qp = create_qparams(mode, meta, scale=mge.tensor(0.5, dtype="float32"),
                            zero_point=None if zp is None else mge.tensor(zp, dtype="float32"))
        return fake_quant_tensor(x, qp)
    y, (dx,) = _grads(fn, GOLD["fq_x"])
    np.testing.assert_array_equal(y, GOLD[f"fq_{name}_y"])   # halves round away from zero
    np.testing.assert_array_equal(dx, GOLD[f"fq_{name}_dx"])


def test_tqt_and_lsq_forward_and_gradients():
    tqt = _grads(lambda x, s: tqt_forward(-127, 127, x, s), GOLD["fq_x"] * 10,
                 np.array([-1.0], "float32"))
    lsq = _grads(lambda x, s: lsq_forward(-128, 127, x, s, mge.tensor([3.0]),
                                          mge.tensor([0.5])),
                 GOLD["fq_x"] * 10, np.array([0.3], "float32"))
    for name, (y, (dx, ds)) in (("tqt", tqt), ("lsq", lsq)):
        np.testing.assert_allclose(y, GOLD[f"{name}_y"], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(dx, GOLD[f"{name}_dx"])
        np.testing.assert_allclose(ds, GOLD[f"{name}_ds"], rtol=1e-5)


def test_observers_match_megengine():
    for name, ob in (("minmax_sym", MinMaxObserver()),
                     ("minmax_asym", MinMaxObserver(mode=QuantMode.ASYMMERTIC, dtype="quint8")),
                     ("ema", ExponentialMovingAverageObserver(momentum=0.8))):
        for b in GOLD["obs_batches"]:
            ob(mge.tensor(b))
        qp = ob.get_qparams()
        np.testing.assert_allclose([ob.min_val.numpy(), ob.max_val.numpy()],
                                   GOLD[f"obs_{name}_minmax"], rtol=1e-6)
        np.testing.assert_allclose(qp.scale.numpy(), GOLD[f"obs_{name}_scale"], rtol=1e-6)
        if f"obs_{name}_zp" in GOLD:
            np.testing.assert_array_equal(qp.zero_point.numpy(), GOLD[f"obs_{name}_zp"])


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.conv = M.ConvBnRelu2d(3, 4, 3, padding=1)
        self.linear = M.Linear(4 * 6 * 6, 5)
        self.add = M.Elemwise("add")
        self.dequant = M.DequantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.conv(x)
        x = self.linear(F.flatten(x, 1))
        x = self.add(x, x)
        return self.dequant(x)


def _net(prefix="net_init.", **kwargs):
    net = Net()
    net.load_state_dict({k[len(prefix):]: GOLD[k] for k in GOLD.files if k.startswith(prefix)})
    return quantize_qat(net, **kwargs)


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_qat_network_trains_and_evaluates_as_megengine(traced):
    net = _net()
    run = mge.jit.trace(lambda x: net(x), symbolic=True) if traced else net
    for i, xb in enumerate(GOLD["net_x"]):
        np.testing.assert_allclose(run(mge.tensor(xb)).numpy(), GOLD[f"net_train_y{i}"],
                                   rtol=1e-4, atol=1e-4)
    ob = net.conv.act_observer
    np.testing.assert_allclose([ob.min_val.numpy(), ob.max_val.numpy()],
                               GOLD["net_conv_act_minmax"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.conv.bn.running_mean.numpy(), GOLD["net_running_mean"],
                               rtol=1e-5, atol=1e-6)
    net.eval()
    run = mge.jit.trace(lambda x: net(x), symbolic=True) if traced else net
    np.testing.assert_allclose(run(mge.tensor(GOLD["net_x"][0])).numpy(), GOLD["net_eval_y"],
                               rtol=1e-4, atol=1e-4)


def test_tqt_network_gradients_match_megengine():
    net = _net("tqt_net_init.", qconfig=tqt_qconfig)
    gm = GradManager().attach(net.parameters())
    with gm:
        y = net(mge.tensor(GOLD["net_x"][1]))
        gm.backward(y.sum())
    np.testing.assert_allclose(y.numpy(), GOLD["tqt_net_y"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(net.conv.act_fake_quant.scale.grad.numpy(),
                               GOLD["tqt_net_conv_act_scale_grad"], rtol=1e-3)
    np.testing.assert_allclose(net.linear.weight.grad.numpy(), GOLD["tqt_net_linear_w_grad"],
                               rtol=1e-4, atol=1e-4)


def test_quantize_converts_weights_as_megengine():
    net = _net()
    for xb in GOLD["net_x"]:
        net(mge.tensor(xb))
    net.eval()
    disable_observer(net)
    quantize(net)
    net.eval()    # converted modules start in training mode, as in MegEngine
    assert type(net.conv).__name__ == "ConvBnRelu2d" and repr(net.conv).startswith("Quantized.")
    np.testing.assert_allclose(qdtype.get_scale(net.conv.weight_dtype),
                               GOLD["net_q_conv_w_scale"], rtol=1e-6)
    np.testing.assert_allclose(qdtype.get_scale(net.conv.output_dtype),
                               GOLD["net_q_conv_out_scale"], rtol=1e-5)
    np.testing.assert_allclose(qdtype.get_scale(net.quant.output_dtype),
                               GOLD["net_q_quant_scale"], rtol=1e-5)
    np.testing.assert_array_equal(net.conv.weight.numpy(), GOLD["net_q_conv_w"])
    np.testing.assert_allclose(net.conv.bias.numpy(), GOLD["net_q_conv_b"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(net.linear.weight.numpy(), GOLD["net_q_linear_w"])
    net.train()
    with pytest.raises(ValueError, match="quantized module only support inference"):
        net(mge.tensor(GOLD["net_x"][0]))


def test_quantized_dtypes():
    q = qdtype.qint8(0.25)
    assert q.metadata["mgb_dtype"] == {"name": "QuantizedS8", "scale": 0.25}
    assert qdtype.get_zero_point(qdtype.quint8(0.1, 128)) == 128
    with pytest.raises(ValueError, match="zero_point should be within"):
        qdtype.quint8(0.1, 300)
    with pytest.raises(ValueError, match="only supports symmetric"):
        qdtype.create_quantized_dtype(qdtype._builtin_quant_dtypes["qint8"], 0.1, 3)
    arr = np.array([0.3, -1.0, 100.0], np.float32)
    stored = qdtype.convert_to_qint8(arr, q)
    assert stored.dtype == np.int8 and stored.tolist() == [1, -4, 127]
    np.testing.assert_allclose(qdtype.convert_from_qint8(stored), [0.25, -1.0, 31.75])


def test_qat_concat_has_megengines_unused_weight_observer():
    """MegEngine's QAT Concat keeps a weight observer and fake quantizer (never fed), so a
    QAT state dict has cat.weight_observer.{min,max}_val and strict loads work both ways
    (tests/data/show_megengine_qat_concat.py)."""
    from megtrace.quantization import reset_qconfig

    class Net(M.Module):
        def __init__(self):
            super().__init__()
            self.q, self.c, self.cat = M.QuantStub(), M.Conv2d(3, 2, 1), M.Concat()

        def forward(self, x):
            y = self.c(self.q(x))
            return self.cat([y, y], axis=1)

    x = mge.tensor(np.linspace(-1, 1, 24, dtype="float32").reshape(2, 3, 2, 2))
    q = quantize_qat(Net())
    q(x)
    assert [k for k in q.state_dict() if k.startswith("cat.")] == [
        "cat.act_observer.max_val", "cat.act_observer.min_val", "cat.act_observer.momentum",
        "cat.act_observer.runtime_momentum", "cat.weight_observer.max_val",
        "cat.weight_observer.min_val"]
    assert q.cat.with_weight and q.cat.get_weight_dtype() is not None
    assert [type(q.cat.weight_observer).__name__, type(q.cat.weight_fake_quant).__name__] == [
        "MinMaxObserver", "FakeQuantize"]
    assert (q.cat.weight_observer.min_val.item(), q.cat.weight_observer.max_val.item()) == (
        np.finfo(np.float32).max, -np.finfo(np.float32).max)
    r = reset_qconfig(q, tqt_qconfig, inplace=False)
    assert type(r.cat.weight_fake_quant).__name__ == "TQT" and r.cat.weight_observer is None
    q.eval()
    z = quantize(q)
    z.eval()
    assert z(x).shape == (2, 4, 2, 2)
