"""Golden data for tests/test_quantized_batch_conv.py, made by real MegEngine 1.13:
    MEGREF_BIND=/work/wt /work/shared/megref/mpy tests/data/make_megengine_batch_conv_bias.py
F.quantized.batch_conv_bias_activation (BatchConvBias: sample n convolved with weight[n])
on qint8 input/weight and a qint32 bias, relu, qint8 output (stride 2, padding 1), run
eagerly and traced with capture_as_const, dumped as FBS_V2 (bcb_v2.mge) and FBS
(bcb_v1.mge). bcb.npz: the inputs' stored integers with their scales, and the eager output's
stored integers (`out_q`), scale `so`."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
from megengine.core.tensor import dtype
from megengine.jit import trace

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_batch_conv_bias")
rs = np.random.RandomState(7)
x_i = rs.randint(-20, 20, (2, 3, 9, 9)).astype(np.int8)
w_i = rs.randint(-8, 8, (2, 5, 3, 3, 3)).astype(np.int8)
b_i = rs.randint(-300, 300, (1, 5, 1, 1)).astype(np.int32)
sx, sw, so = 0.5, 0.25, 2.0
# MegEngine's Tensor(array, dtype=qint8(s)) stores the array's values as they are (a cast,
# not a quantization): the integers go in
x = mge.Tensor(x_i.astype("float32"), dtype=dtype.qint8(sx))
w = mge.Tensor(w_i.astype("float32"), dtype=dtype.qint8(sw))
b = mge.Tensor(b_i.astype("float32"), dtype=dtype.qint32(sx * sw))
for t, i in ((x, x_i), (w, w_i), (b, b_i)):
    assert np.array_equal(t.numpy().view(i.dtype), i)


def fn(x, w, b):
    return F.quantized.batch_conv_bias_activation(
        x, w, b, dtype=dtype.qint8(so), stride=2, padding=1, nonlinear_mode="relu")


eager = fn(x, w, b)
traced = trace(fn, symbolic=True, capture_as_const=True)
out = traced(x, w, b)
assert np.array_equal(out.numpy().view(np.int8), eager.numpy().view(np.int8))
os.makedirs(HERE, exist_ok=True)
for fmt, name in (("FBS_V2", "bcb_v2.mge"), ("FBS", "bcb_v1.mge")):
    traced.dump(os.path.join(HERE, name), arg_names=["x", "w", "b"], output_names=["y"],
                optimize_for_inference=False, dump_format=fmt)
out_q = eager.numpy().view(np.int8)
assert dtype.get_scale(eager.dtype) == so
np.savez(os.path.join(HERE, "bcb.npz"), x_i=x_i, w_i=w_i, b_i=b_i, sx=sx, sw=sw, so=so,
         out_q=out_q)
print("out_q range", out_q.min(), out_q.max(), "nonzero", np.count_nonzero(out_q))
