"""The Tensor facts tests/test_tensor_semantics.py asserts, shown by MegEngine 1.13 itself
(run with /work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  1-m float32 [0.0, 1.0, 0.0]
  m*2 float32 [2.0, 0.0, 2.0]
  m+1 float32 [2.0, 1.0, 2.0]
  m/2 float32 [0.5, 0.0, 0.5]
  m==2 bool [False, False, False]
  m<2 bool [True, True, True]
  (m*10).sum() float32 20.0
  m*i float32 [1.0, 0.0, 3.0]
  m*h float32 [1.0, 0.0, 3.0]
  m-u float32 [0.0, -2.0, -8.0]
  h*u float32 [1.0, 4.0, 27.0]
  h*i8 float32 [1.0, 4.0, 9.0]
  i8*i int32 [1, 4, 9]
  m&m bool [True, False, True]
  a%3 int32 [0, 2, 2, 2, 1]
  7%b int32 [1, 1, -2, 1, -1]
  F.mod(a,b) int32 [0, 2, -1, 1, -1]
  fa%fb float32 [0.0, -1.0, 2.5, -1.0, 1.0]
  floor(a) int32 [3, -4, 5, -7, 7]
  ceil(a) int32 [3, -4, 5, -7, 7]
  round(a) int32 [3, -4, 5, -7, 7]
  round(T(1.5)) Tensor float32 2.0
  round(T([-2.5, 0.4])) Tensor float32 [-3.0, 0.0]
  math.floor(T(2.5)) Tensor float32 2.0
  math.ceil(T([2.5, -1.2])) Tensor float32 [3.0, -1.0]
  T([1, 2]) << 1 int32 [2, 4]
  T([4, 9]) >> 1 int32 [2, 4]
  1 << T([1, 2]) int32 [2, 4]
  copies: Tensor [0.0, 0.0, 0.0] Parameter [0.0, 0.0, 0.0] view [0.0, 0.0] set_value [1.0, 1.0, 1.0] load_state_dict [[1.0, 1.0]]
  Tensor(np.float16(1.5)) float16 Tensor(np.float64(1.5)) float32
  scatter: returns inp True inp [[1.0, 20.0, 3.0], [10.0, 5.0, 30.0]]
  float16 mean float32 2.33333 var float32 1.55556
"""
import math
import sys

import numpy as np
import megengine as mge
import megengine.functional as F
import megengine.module as M

T = mge.Tensor
m, i = T([True, False, True]), T([1, 2, 3])
h, i8 = T([1., 2., 3.], dtype="float16"), T(np.array([1, 2, 3], "int8"))
u = T(np.array([1, 2, 9], "uint8"))
a, b = T([3, -4, 5, -7, 7]), T([3, 3, -3, 2, -2])
fa, fb = T([3., -4., 5.5, -7., 7.]), T([3., 3., -3., 2., -2.])
CASES = {"1-m": lambda: 1 - m, "m*2": lambda: m * 2, "m+1": lambda: m + 1, "m/2": lambda: m / 2,
         "m==2": lambda: m == 2, "m<2": lambda: m < 2, "(m*10).sum()": lambda: (m * 10).sum(),
         "m*i": lambda: m * i, "m*h": lambda: m * h, "m-u": lambda: m - u, "h*u": lambda: h * u,
         "h*i8": lambda: h * i8, "i8*i": lambda: i8 * i, "m&m": lambda: m & m,
         "a%3": lambda: a % 3, "7%b": lambda: 7 % b, "F.mod(a,b)": lambda: F.mod(a, b),
         "fa%fb": lambda: fa % fb, "floor(a)": lambda: F.floor(a), "ceil(a)": lambda: F.ceil(a),
         "round(a)": lambda: F.round(a)}
for name, fn in CASES.items():
    r = fn()
    print(name, r.dtype, r.numpy().tolist())
for name, fn in {"round(T(1.5))": lambda: round(T(1.5)),
                 "round(T([-2.5, 0.4]))": lambda: round(T([-2.5, 0.4])),
                 "math.floor(T(2.5))": lambda: math.floor(T(2.5)),
                 "math.ceil(T([2.5, -1.2]))": lambda: math.ceil(T([2.5, -1.2])),
                 "T([1, 2]) << 1": lambda: T([1, 2]) << 1, "T([4, 9]) >> 1": lambda: T([4, 9]) >> 1,
                 "1 << T([1, 2])": lambda: 1 << T([1, 2])}.items():
    r = fn()
    print(name, *([type(r).__name__] if "<<" not in name and ">>" not in name else []),
          r.dtype, r.numpy().tolist())
arr = np.zeros(3, "float32")
t, p, v = T(arr), mge.Parameter(arr), T(arr[::2])
arr[0] = 5
s, src = T([1., 2., 3.]), np.ones(3, "float32")
s.set_value(src)
src[1] = 7
lin, w = M.Linear(2, 1), np.ones((1, 2), "float32")
lin.load_state_dict({"weight": w, "bias": np.zeros(1, "float32")})
w[0, 0] = 9
print("copies: Tensor", t.numpy().tolist(), "Parameter", p.numpy().tolist(), "view",
      v.numpy().tolist(), "set_value", s.numpy().tolist(), "load_state_dict",
      lin.weight.numpy().tolist(), file=sys.stdout)
print("Tensor(np.float16(1.5))", T(np.float16(1.5)).dtype, "Tensor(np.float64(1.5))",
      T(np.float64(1.5)).dtype)
x = T([[1., 2., 3.], [4., 5., 6.]])
r = F.scatter(x, 0, T([[1, 0, 1]], dtype="int32"), T([[10., 20., 30.]]))
print("scatter: returns inp", r is x, "inp", x.numpy().tolist())
h3 = T([1., 2., 4.], dtype="float16")
print("float16 mean", F.mean(h3).dtype, round(float(F.mean(h3).numpy()), 5),
      "var", F.var(h3).dtype, round(float(F.var(h3).numpy()), 5))
