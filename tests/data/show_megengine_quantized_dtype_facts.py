"""Quantized dtype facts shown by MegEngine 1.13 itself (run with /work/shared/megref/mpy;
prints, writes nothing; megtrace prints the same with megtrace imported instead). Output
on 1.13.0, CPU:

  qint8(0.1) 0.1
  quint8(0.1, 3) {'name': 'Quantized8Asymm', 'scale': 0.1, 'zero_point': 3}
  tensor 0.10000000149011612 0.10000000149011612 False
  from array 0.10000000149011612
  equal False False False True
  reduce shapes () () () () () () (2, 1)
  reduce values 1.5 int8 {'mgb_dtype': {'name': 'QuantizedS8', 'scale': 0.10000000149011612}}
  is_lowbit False False False

So qint8(0.1) keeps the Python float, but a tensor's dtype holds the float32 scale (its
C++ dtype stores a float), also for a tensor made from an array of dtype qint8(0.1);
is_dtype_equal compares the scales as stored (False for 0.1 against its float32 value),
NumPy's == ignores them. A full reduction of a quantized tensor is 0-d, as for floats.
"""
import numpy as np
try:
    import megengine as mge
    import megengine.functional as F
    from megengine.core.tensor import dtype as D
except ImportError:
    import megtrace as mge
    import megtrace.functional as F
    from megtrace.core.tensor import dtype as D

print("qint8(0.1)", D.qint8(0.1).metadata["mgb_dtype"]["scale"])
print("quint8(0.1, 3)", D.quint8(0.1, 3).metadata["mgb_dtype"])
t = mge.tensor(np.array([0.3, 0.5], np.float32)).astype(D.qint8(0.1))
print("tensor", D.get_scale(t.dtype), D.get_scale(t.numpy().dtype), D.get_scale(t.dtype) == 0.1)
u = mge.tensor(np.array([3, 5], np.int8).view(D.qint8(0.1)))
print("from array", D.get_scale(u.dtype))
print("equal", D.is_dtype_equal(t.dtype, D.qint8(0.1)), D.is_dtype_equal(t.dtype, D.qint8(0.1000001)),
      D.is_dtype_equal(D.qint8(0.1), D.qint8(float(np.float32(0.1)))), t.dtype == D.qint8(0.1))
q = mge.tensor(np.arange(6, dtype=np.float32) / 10).astype(D.qint8(0.1))
print("reduce shapes", q.sum().shape, q.max().shape, q.min().shape, F.sum(q).shape, F.max(q).shape,
      F.sum(q, axis=0).shape, F.sum(q.reshape(2, 3), axis=1, keepdims=True).shape)
print("reduce values", q.sum().numpy().view(np.int8).tolist() if False else float(q.sum().astype("float32").numpy()),
      str(q.sum().dtype), q.max().numpy().dtype.metadata)
print("is_lowbit", D.is_lowbit(D.qint4(0.1)), D.is_lowbit(D.qint8(0.1)), D.is_lowbit(np.int8))
