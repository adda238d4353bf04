"""Golden data for tests/test_quantized_eager.py, made by real MegEngine 1.13:
    /work/shared/megref/mpy tests/data/make_quantized_golden.py   (writes quantized_golden.npz)
Quantized dtypes run eagerly: TypeCvt to and from every quantized dtype (ties included),
integer Elemwise/layout ops on qint8, quantized matmul, ConvBias / BatchConvBias /
ConvolutionBackwardData (F.quantized), ElemwiseMultiType's quantized modes, and a
QAT network calibrated, converted by `quantize` and run as quantized modules. Arrays are
saved as their stored integers; scales and names separately."""
import os
import sys
import types

import numpy as np

try:            # the chroot's OpenCV may lack libGL; MegEngine only needs it for transforms
    import cv2  # noqa: F401
except ImportError:
    _cv2 = types.ModuleType("cv2")
    _cv2.__getattr__ = lambda name: 0
    sys.modules["cv2"] = _cv2

import megengine as mge  # noqa: E402
import megengine.functional as F  # noqa: E402
import megengine.module as M  # noqa: E402
from megengine.core.tensor import dtype as D  # noqa: E402
from megengine.functional.elemwise import _elemwise_multi_type  # noqa: E402
from megengine.quantization import quantize, quantize_qat  # noqa: E402
from megengine.quantization.quantize import disable_observer, enable_observer  # noqa: E402

rng = np.random.RandomState(2024)
out = {}


def raw(t):
    return np.asarray(t.numpy()).view(np.dtype(t.numpy().dtype.str))


def meta(t):
    m = t.dtype.metadata["mgb_dtype"]
    return np.array([m["scale"], m.get("zero_point", 0)], np.float64)


# -- TypeCvt ---------------------------------------------------------------------------
x = np.concatenate([rng.uniform(-3, 3, 40).astype(np.float32),
                    np.array([0.25, -0.25, 0.75, -0.75, 1.25, 100.0, -100.0], np.float32)])
out["cvt_x"] = x
dtypes = {"qint8": D.qint8(0.5), "quint8": D.quint8(0.05, 128), "qint4": D.qint4(0.5),
          "quint4": D.quint4(0.5, 7), "qint32": D.qint32(0.5), "qint1": D.qint1(0.5)}
for name, dt in dtypes.items():
    q = mge.tensor(x).astype(dt)
    out[f"cvt_{name}"] = raw(q)
    out[f"cvt_{name}_back"] = q.astype("float32").numpy()
    out[f"cvt_{name}_meta"] = meta(q)
q8 = mge.tensor(x).astype(D.qint8(0.5))
out["cvt_q8_to_q8"] = raw(q8.astype(D.qint8(0.3)))
out["cvt_q8_to_quint8"] = raw(q8.astype(D.quint8(0.1, 100)))
out["cvt_q8_to_int32"] = q8.astype("int32").numpy()
q32 = mge.tensor(x).astype(D.qint32(0.01))
out["cvt_q32_to_q8"] = raw(q32.astype(D.qint8(0.07)))
out["new_tensor"] = raw(mge.tensor(np.array([1.7, -2.2, 3.9], np.float32), dtype=D.qint8(0.1)))

# -- integer ops on qint8 ----------------------------------------------------------------
a = mge.tensor(rng.uniform(-60, 60, (3, 4)).astype(np.float32)).astype(D.qint8(0.5))
b = mge.tensor(rng.uniform(-60, 60, (3, 4)).astype(np.float32)).astype(D.qint8(0.5))
out["int_a"], out["int_b"] = raw(a), raw(b)
out["int_add"] = raw(a + b)
out["int_sub"] = raw(a - b)
out["int_neg"] = raw(-a)
out["int_relu"] = raw(F.relu(a))
out["int_max"] = raw(F.maximum(a, b))
out["int_concat"] = raw(F.concat([a, b], axis=1))
out["int_transpose"] = raw(a.T)
out["int_getitem"] = raw(a[1:, ::2])
out["int_pad"] = raw(F.nn.pad(a, ((1, 1), (2, 0)), mode="reflect"))

# -- matmul --------------------------------------------------------------------------------
m1 = mge.tensor(rng.uniform(-1, 1, (3, 12)).astype(np.float32)).astype(D.qint8(0.01))
m2 = mge.tensor(rng.uniform(-1, 1, (5, 12)).astype(np.float32)).astype(D.qint8(0.02))
out["mm_a"], out["mm_b"] = raw(m1), raw(m2)
mm = F.matmul(m1, m2, transpose_b=True)
out["mm"], out["mm_meta"] = raw(mm), meta(mm)

# -- ConvBias ------------------------------------------------------------------------------
conv_cases = [  # N, IC, OC, H, W, K, stride, pad, dilation, groups, mode
    (2, 4, 6, 9, 8, 3, 1, 1, 1, 1, "identity"),
    (1, 6, 4, 10, 7, 3, 2, 0, 1, 2, "relu"),
    (2, 3, 5, 8, 8, 2, 1, 2, 2, 1, "relu"),
]
for i, (n, ic, oc, h, w, k, s, p, d, g, mode) in enumerate(conv_cases):
    xs, ws, os_ = 0.05, 0.01, 0.03
    xq = mge.tensor(rng.uniform(-3, 3, (n, ic, h, w)).astype(np.float32)).astype(D.qint8(xs))
    wshape = (oc, ic, k, k) if g == 1 else (g, oc // g, ic // g, k, k)
    wq = mge.Parameter(rng.uniform(-1, 1, wshape).astype(np.float32)).astype(D.qint8(ws))
    bq = mge.Parameter(rng.uniform(-1, 1, (1, oc, 1, 1)).astype(np.float32)).astype(
        D.qint32(xs * ws))
    y = F.quantized.conv_bias_activation(xq, wq, bq, D.qint8(os_), stride=s, padding=p,
                                         dilation=d, groups=g, nonlinear_mode=mode)
    out[f"conv{i}_x"], out[f"conv{i}_w"], out[f"conv{i}_b"] = raw(xq), raw(wq), raw(bq)
    out[f"conv{i}_y"], out[f"conv{i}_meta"] = raw(y), meta(y)

# -- BatchConvBias -------------------------------------------------------------------------
xq = mge.tensor(rng.uniform(-2, 2, (3, 4, 5, 1)).astype(np.float32)).astype(D.qint8(0.04))
wq = mge.tensor(rng.uniform(-1, 1, (3, 6, 4, 1, 1)).astype(np.float32)).astype(D.qint8(0.01))
bq = mge.tensor(rng.uniform(-1, 1, (1, 6, 1, 1)).astype(np.float32)).astype(D.qint32(0.0004))
y = F.quantized.batch_conv_bias_activation(xq, wq, bq, dtype=D.qint8(0.02))
out["bconv_x"], out["bconv_w"], out["bconv_b"], out["bconv_y"] = raw(xq), raw(wq), raw(bq), raw(y)

# -- ConvolutionBackwardData ---------------------------------------------------------------
xq = mge.tensor(rng.uniform(-1, 1, (2, 4, 5, 6)).astype(np.float32)).astype(D.qint8(0.05))
wq = mge.Parameter(rng.uniform(-1, 1, (4, 3, 3, 2)).astype(np.float32)).astype(D.qint8(0.04))
y = F.quantized.conv_transpose2d(xq, wq, dtype=D.qint8(0.05), stride=(2, 1), padding=(1, 0))
out["tconv_x"], out["tconv_w"], out["tconv_y"] = raw(xq), raw(wq), raw(y)

# -- ElemwiseMultiType ---------------------------------------------------------------------
e1 = mge.tensor(rng.normal(size=(4, 5)).astype(np.float32)).astype(D.qint8(0.03))
e2 = mge.tensor(rng.normal(size=(4, 5)).astype(np.float32)).astype(D.qint8(0.02))
out["emt_a"], out["emt_b"] = raw(e1), raw(e2)
for mode in ("qadd", "qsub", "qmul", "qfuse_add_relu", "qfuse_add_tanh"):
    out[f"emt_{mode}"] = raw(_elemwise_multi_type(e1, e2, mode=mode, dtype=D.qint8(0.025)))
for mode in ("qabs", "qsin", "qcos", "qrelu"):
    out[f"emt_{mode}"] = raw(_elemwise_multi_type(e1, mode=mode, dtype=D.qint8(0.025)))


# -- a converted network -------------------------------------------------------------------
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


net = Net()
for name, p in net.named_parameters():
    p[...] = rng.normal(scale=0.3, size=p.shape).astype(np.float32)
    out["net_init." + name] = p.numpy()
for name, bf in net.named_buffers():
    if "running_var" in name:
        bf[...] = rng.uniform(0.5, 1.5, bf.shape).astype(np.float32)
    elif "running_mean" in name:
        bf[...] = rng.normal(scale=0.1, size=bf.shape).astype(np.float32)
    out["net_init." + name] = bf.numpy()
net.eval()
quantize_qat(net)
enable_observer(net)
calib = rng.normal(size=(3, 2, 3, 6, 6)).astype(np.float32)
out["net_calib"] = calib
for xb in calib:
    net(mge.tensor(xb))
disable_observer(net)
x_eval = rng.normal(size=(2, 3, 6, 6)).astype(np.float32)
out["net_x"] = x_eval
out["net_qat_y"] = net(mge.tensor(x_eval)).numpy()
quantize(net)
net.eval()
out["net_q_y"] = net(mge.tensor(x_eval)).numpy()



# -- one quantized operand: the other is converted to its dtype (ints: stored as they are)
mq32 = mge.tensor(np.array([10.0, -4.0, 3.3], np.float32)).astype(D.qint32(0.5))
mq8 = mge.tensor(np.array([10.0, -4.0, 3.3], np.float32)).astype(D.qint8(0.5))
mf = mge.tensor(np.array([5.0, 1.25, -0.75], np.float32))
out["mix_q32_plus_f"] = raw(mq32 + mf)
out["mix_f_plus_q32"] = raw(mf + mq32)
out["mix_q32_plus_int"] = raw(mq32 + 1)
out["mix_q32_plus_float"] = raw(mq32 + 1.5)
out["mix_q8_plus_i32"] = raw(mq8 + mge.tensor(np.array([5, 1, -2], np.int32)))

# -- pooling and nearest resizing on qint8 (ties: sums of 4 values that are 2 mod 4) -----
pq = mge.tensor(rng.uniform(-3, 3, (2, 3, 6, 6)).astype(np.float32)).astype(D.qint8(0.1))
ties = mge.tensor(np.array([1, 1, -1, -1, 3, 3, -3, -3, 5, 1, 0, 0, 2, 0, 0, 0],
                           np.float32).reshape(1, 1, 4, 4)).astype(D.qint8(1.0))
out["pool_x"], out["pool_ties"] = raw(pq), raw(ties)
out["pool_max"] = raw(F.max_pool2d(pq, 2))
out["pool_avg"] = raw(F.avg_pool2d(pq, 3, 2, 1))
out["pool_avg_incl"] = raw(F.avg_pool2d(pq, 3, 1, 1, mode="average"))
out["pool_adaptive_avg"] = raw(F.adaptive_avg_pool2d(pq, (2, 3)))
out["pool_adaptive_max"] = raw(F.adaptive_max_pool2d(pq, 2))
out["pool_nearest"] = raw(F.nn.interpolate(pq, scale_factor=2, mode="nearest"))
out["pool_ties_avg"] = raw(F.avg_pool2d(ties, 2))
out["pool_ties_avg_pad"] = raw(F.avg_pool2d(ties, 2, 2, 1))

# -- BatchMatMulActivation, float and converted ----------------------------------------------
class BmmNet(M.Module):
    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.bmm = M.BatchMatMulActivation(3, 8, 4, bias=True, nonlinear_mode="relu")
        self.dequant = M.DequantStub()

    def forward(self, x):
        return self.dequant(self.bmm(self.quant(x)))


bnet = BmmNet()
bnet.bmm.bias[...] = rng.normal(size=(4,)).astype(np.float32)
out["bmm_init.bmm.weight"], out["bmm_init.bmm.bias"] = bnet.bmm.weight.numpy(), bnet.bmm.bias.numpy()
bx = rng.normal(size=(3, 8, 4)).astype(np.float32)
out["bmm_x"], out["bmm_float_y"] = bx, bnet(mge.tensor(bx)).numpy()
bnet.eval()
quantize_qat(bnet)
enable_observer(bnet)
bnet(mge.tensor(bx))
disable_observer(bnet)
quantize(bnet)
bnet.eval()
out["bmm_q_y"] = bnet(mge.tensor(bx)).numpy()

np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantized_golden.npz"), **out)
print("wrote", len(out), "arrays")
