"""Golden data for tests/test_quantized_eager.py's extra modes, made by real MegEngine 1.13:
    /work/shared/megref/mpy tests/data/make_megengine_quantized_modes.py
(writes quantized_modes.npz). ElemwiseMultiType's quantized modes beyond the common ones
(qh_swish of MobileNetV3-style nets, qfuse_mul_add3, qfloor, qceil, qround, qlog, qpow,
qfast_tanh, qerf, qfuse_add_h_swish, qcond_leq_mov) on every qint8 value; the float
Elemwise modes fuse_add_h_swish, cond_leq_mov and fast_tanh; and ConvBias on qint8 with
nonlinear_mode="h_swish" and with conv_mode="convolution". Quantized arrays are saved as
their stored integers."""
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

out = {}


def raw(t):
    return np.asarray(t.numpy()).view(np.dtype(t.numpy().dtype.str))


def q8(ints, scale):
    return mge.tensor(ints.astype(np.float32) * np.float32(scale)).astype(D.qint8(scale))


# -- ElemwiseMultiType: x runs over every qint8 value, y and z are rotations of it ----------
ints = np.arange(-128, 128).astype(np.int8)
out["emt_x"], out["emt_y"], out["emt_z"] = ints, np.roll(ints, 37), np.roll(ints, 91)
out["emt_pos"] = (np.abs(ints.astype(np.int32)) + 1).clip(1, 127).astype(np.int8)
SCALES = {"x": 0.05, "y": 0.03, "z": 0.02, "pos": 0.05, "out": 0.04}
out["emt_scales"] = np.array([SCALES[k] for k in ("x", "y", "z", "pos", "out")])
x, y, z = q8(ints, 0.05), q8(np.roll(ints, 37), 0.03), q8(np.roll(ints, 91), 0.02)
pos = q8(out["emt_pos"], 0.05)
MODES = {"qh_swish": (x,), "qfuse_mul_add3": (x, y, z), "qfloor": (x,), "qceil": (x,),
         "qround": (x,), "qlog": (pos,), "qpow": (pos, y), "qfast_tanh": (x,), "qerf": (x,),
         "qfuse_add_h_swish": (x, y), "qcond_leq_mov": (x, y, z)}
for mode, args in MODES.items():
    out[f"emt_{mode}"] = raw(_elemwise_multi_type(*args, mode=mode, dtype=D.qint8(0.04)))

# -- float Elemwise modes -------------------------------------------------------------------
fx = np.linspace(-5, 5, 41).astype(np.float32)
fy = np.linspace(2, -2, 41).astype(np.float32)
fz = np.linspace(-1, 3, 41).astype(np.float32)
out["float_x"], out["float_y"], out["float_z"] = fx, fy, fz
t = [mge.tensor(a) for a in (fx, fy, fz)]
out["float_fuse_add_h_swish"] = M.Elemwise("fuse_add_h_swish")(t[0], t[1]).numpy()
out["float_cond_leq_mov"] = M.Elemwise("cond_leq_mov")(t[0], t[1], t[2]).numpy()
out["float_fast_tanh"] = M.Elemwise("fast_tanh")(t[0]).numpy()

# -- ConvBias: h_swish, and conv_mode="convolution" -------------------------------------------
rng = np.random.RandomState(7)
xq = mge.tensor(rng.uniform(-2, 2, (2, 3, 5, 6)).astype(np.float32)).astype(D.qint8(0.05))
wq = mge.tensor(rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)).astype(D.qint8(0.01))
bq = mge.tensor(rng.uniform(-1, 1, (1, 4, 1, 1)).astype(np.float32)).astype(D.qint32(0.0005))
out["conv_x"], out["conv_w"], out["conv_b"] = raw(xq), raw(wq), raw(bq)
out["conv_h_swish"] = raw(F.quantized.conv_bias_activation(
    xq, wq, bq, D.qint8(0.03), padding=1, nonlinear_mode="h_swish"))
out["conv_h_swish_nobias_stride2"] = raw(F.quantized.conv_bias_activation(
    xq, wq, mge.tensor(np.zeros((1, 4, 1, 1), np.float32)).astype(D.qint32(0.0005)),
    D.qint8(0.02), stride=2, nonlinear_mode="H_SWISH"))
out["conv_convolution"] = raw(F.quantized.conv_bias_activation(
    xq, wq, bq, D.qint8(0.03), padding=1, conv_mode="convolution"))
out["conv_cross_correlation"] = raw(F.quantized.conv_bias_activation(
    xq, wq, bq, D.qint8(0.03), padding=1))

np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantized_modes.npz"), **out)
for k, v in out.items():
    print(k, v.dtype, v.shape, v.ravel()[:6].tolist())
