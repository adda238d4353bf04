"""Golden data for tests/test_quantization.py, made by real MegEngine 1.13:
    /work/shared/megref/mpy tests/data/make_qat_golden.py   (writes qat_golden.npz here)
Fake-quant/TQT/LSQ forward and gradients, observer qparams, a QAT network (QuantStub,
ConvBnRelu2d, Linear, Elemwise add) trained three steps then evaluated, and what
`quantize` converts its weights to. Inputs come from a fixed NumPy seed; the test
rebuilds the same network in megtrace from the saved arrays."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.autodiff import GradManager
from megengine.quantization import (ExponentialMovingAverageObserver, MinMaxObserver,
                                    QuantMode, tqt_qconfig)
from megengine.quantization.quantize import disable_observer, quantize, quantize_qat
from megengine.quantization.utils import fake_quant_tensor, lsq_forward, tqt_forward, create_qparams

rng = np.random.RandomState(1234)
out = {}

# -- raw fake quantization, with exact halves on the grid ------------------------------
x = (rng.randn(4, 6) * 3).astype("float32")
x[0, :4] = [0.25, -0.25, 0.75, -0.75]          # x / 0.5 = +-0.5, +-1.5
out["fq_x"] = x
for name, meta, mode, zp in (("s8", "qint8", QuantMode.SYMMERTIC, None),
                             ("u8", "quint8", QuantMode.ASYMMERTIC, 100.0)):
    xt = mge.tensor(x)
    qp = create_qparams(mode, meta, scale=mge.tensor(0.5, dtype="float32"),
                        zero_point=None if zp is None else mge.tensor(zp, dtype="float32"))
    gm = GradManager().attach([xt])
    with gm:
        y = fake_quant_tensor(xt, qp)
        gm.backward((y * mge.tensor(np.arange(24, dtype="float32").reshape(4, 6))).sum())
    out[f"fq_{name}_y"] = y.numpy()
    out[f"fq_{name}_dx"] = xt.grad.numpy()

for name, fn in (("tqt", lambda xt, s: tqt_forward(-127, 127, xt, s)),
                 ("lsq", lambda xt, s: lsq_forward(-128, 127, xt, s,
                                                   mge.tensor([3.0], dtype="float32"),
                                                   mge.tensor([0.5], dtype="float32")))):
    xt = mge.tensor(x * 10)
    s = mge.Parameter(np.array([-1.0 if name == "tqt" else 0.3], "float32"))
    gm = GradManager().attach([xt, s])
    with gm:
        y = fn(xt, s)
        gm.backward((y * mge.tensor(np.arange(24, dtype="float32").reshape(4, 6))).sum())
    out[f"{name}_y"] = y.numpy()
    out[f"{name}_dx"] = xt.grad.numpy()
    out[f"{name}_ds"] = s.grad.numpy()

# -- observers ---------------------------------------------------------------------------
batches = [(rng.randn(3, 5) * (i + 1) + i).astype("float32") for i in range(3)]
out["obs_batches"] = np.stack(batches)
for name, ob in (("minmax_sym", MinMaxObserver()),
                 ("minmax_asym", MinMaxObserver(mode=QuantMode.ASYMMERTIC, dtype="quint8")),
                 ("ema", ExponentialMovingAverageObserver(momentum=0.8))):
    for b in batches:
        ob(mge.tensor(b))
    qp = ob.get_qparams()
    out[f"obs_{name}_scale"] = qp.scale.numpy()
    if qp.zero_point is not None:
        out[f"obs_{name}_zp"] = qp.zero_point.numpy()
    out[f"obs_{name}_minmax"] = np.array([ob.min_val.numpy(), ob.max_val.numpy()])


# -- a QAT network -----------------------------------------------------------------------
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


def build(net, prefix):
    for key, value in sorted(net.state_dict().items()):
        arr = (rng.randn(*value.shape) * 0.3).astype("float32")
        if "running_var" in key:
            arr = np.abs(arr) + 0.5
        out[prefix + key] = arr
    net.load_state_dict({k[len(prefix):]: v for k, v in out.items() if k.startswith(prefix)})
    return net


net = build(Net(), "net_init.")
quantize_qat(net)
xs = [(rng.randn(2, 3, 6, 6)).astype("float32") for _ in range(3)]
out["net_x"] = np.stack(xs)
for i, xb in enumerate(xs):
    out[f"net_train_y{i}"] = net(mge.tensor(xb)).numpy()
out["net_conv_act_minmax"] = np.array([net.conv.act_observer.min_val.numpy(),
                                       net.conv.act_observer.max_val.numpy()])
out["net_running_mean"] = net.conv.bn.running_mean.numpy()
net.eval()
out["net_eval_y"] = net(mge.tensor(xs[0])).numpy()
disable_observer(net)
quantize(net)
out["net_q_conv_w"] = net.conv.weight.numpy().astype("int8")
out["net_q_conv_b"] = net.conv.bias.numpy()
out["net_q_conv_w_scale"] = np.float32(mge.core.tensor.dtype.get_scale(net.conv.weight.dtype))
out["net_q_conv_out_scale"] = np.float32(mge.core.tensor.dtype.get_scale(net.conv.output_dtype))
out["net_q_linear_w"] = net.linear.weight.numpy().astype("int8")
out["net_q_quant_scale"] = np.float32(mge.core.tensor.dtype.get_scale(net.quant.output_dtype))

# -- TQT network step with its gradient on the threshold ---------------------------------
tnet = build(Net(), "tqt_net_init.")
quantize_qat(tnet, qconfig=tqt_qconfig)
gm = GradManager().attach(tnet.parameters())
with gm:
    y = tnet(mge.tensor(xs[1]))
    gm.backward(y.sum())
out["tqt_net_y"] = y.numpy()
out["tqt_net_conv_act_scale_grad"] = tnet.conv.act_fake_quant.scale.grad.numpy()
out["tqt_net_linear_w_grad"] = tnet.linear.weight.grad.numpy()

np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "qat_golden.npz"), **out)
print("wrote", len(out), "arrays")
