"""Training-API facts tests/test_training_api_facts.py asserts, shown by MegEngine 1.13
itself (run with /work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU
(the two "params in `strict=False` mode" lines are MegEngine's logger on stderr):

  amp batch_norm dtypes float16 float16 float16 float16
  amp batch_norm values [-1.176 -1.053 -0.929 -0.805]
  convert_tensor_format(inplace=False) nhwc default (2, 4, 2, 2) 49.6
  load_state_dict dtypes int32 float32
  load_state_dict dtypes float32 float16
  Missing params in `strict=False` mode, missing={'bias'}
  Unused params in `strict=False` mode, unused={'extra'}
  backward(3.0) TypeError; recording after: False
"""
import numpy as np
import megengine as mge, megengine.functional as F, megengine.module as M
import megengine.autodiff as ad
from megengine.amp import autocast

x = mge.tensor(np.arange(32, dtype="float32").reshape(2, 4, 2, 2) / 10)
with autocast():
    a = F.batch_norm(x, training=True)
    b = M.BatchNorm2d(4, affine=False, track_running_stats=False)(x)
    c = M.BatchNorm2d(4, affine=False)(x)
    d = F.batch_norm(x.astype("float16"), training=True)
print("amp batch_norm dtypes", a.dtype, b.dtype, c.dtype, d.dtype)
print("amp batch_norm values", np.round(a.numpy().astype("float32").ravel()[:4], 3))
y = mge.amp.convert_tensor_format(x, inplace=False)
print("convert_tensor_format(inplace=False)", y.format, x.format, y.shape,
      round(float(y.sum()), 4))
lin = M.Linear(2, 1)
lin.load_state_dict({"weight": np.array([[1, 2]], "int32"), "bias": np.zeros(1, "float32")})
print("load_state_dict dtypes", lin.weight.dtype, lin.bias.dtype)
lin.load_state_dict({"weight": np.array([[1, 2]], "float32"), "bias": np.zeros(1, "float16")})
print("load_state_dict dtypes", lin.weight.dtype, lin.bias.dtype)
lin.load_state_dict({"weight": np.ones((1, 2), "float32")}, strict=False)
lin.load_state_dict({"weight": np.ones((1, 2), "float32"), "bias": np.zeros(1, "float32"),
                     "extra": np.zeros(1, "float32")}, strict=False)
w = mge.Parameter(np.ones(3, "float32"))
gm = ad.GradManager().attach([w])
try:
    with gm:
        (w * 2).sum()
        gm.backward(3.0)
    print("backward(3.0) ok")
except Exception as e:
    print(f"backward(3.0) {type(e).__name__}; recording after: {gm._recording}")
