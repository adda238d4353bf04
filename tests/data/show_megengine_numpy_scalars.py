"""NumPy scalars beside tensors in MegEngine 1.13 (run with /work/shared/megref/mpy):
a NumPy scalar is a typed operand and promotes like a tensor of its dtype; Python numbers
(and np.float64, a float subclass) take the tensor's dtype. Output on 1.13.0, CPU:

  u8 * f32: float32 [0.0, 0.502, 1.0]
  u8 - f32: float32 [-127.5, 0.5, 127.5]
  i32 * f32: float32 [0.5, 1.0]
  f32 * i32 (reflected): float32 [0.5, 1.0]
  i32 == f32: bool [0.0, 0.0]
  i32 < f32: bool [1.0, 0.0]
  i32 ** f32: float32 [2.0, 3.0]
  clip i32 f32: float32 [1.5, 2.0, 2.5]
  maximum i32 f32: float32 [1.5, 2.0]
  i32 + f16: float32 [2.5, 3.5]
  f16 + f32: float32 [2.5, 3.5]
  i16 + i32: int32 [40000.0]
  i8 * i32: int32 [300.0]
  i8 + i16: int16 [4.0, 5.0]
  i16 + i64: RuntimeError
  f16 + f64: RuntimeError
  i32 + f64: RuntimeError
  f32 + i32: float32 [2.5, 3.5]
  f16 + i32: float16 [2.5, 3.5]
  bool & bool_: bool [1.0, 0.0]
  bool + i32: float32 [3.0, 2.0]
  i32 += f32: float32 [1.5, 2.5]
  ~int32: TypeError
  ~float32: TypeError
  ~bool: bool [False, True]
"""
import numpy as np
import megengine as mge
import megengine.functional as F

T = mge.tensor
cases = {
    "u8 * f32": lambda: T(np.array([0, 128, 255], "uint8")) * np.float32(1 / 255.),
    "u8 - f32": lambda: T(np.array([0, 128, 255], "uint8")) - np.float32(127.5),
    "i32 * f32": lambda: T([1, 2]) * np.float32(0.5),
    "f32 * i32 (reflected)": lambda: np.float32(0.5) * T([1, 2]),
    "i32 == f32": lambda: T([1, 2]) == np.float32(1.5),
    "i32 < f32": lambda: T([1, 2]) < np.float32(1.5),
    "i32 ** f32": lambda: T([4, 9]) ** np.float32(0.5),
    "clip i32 f32": lambda: F.clip(T([1, 2, 3]), np.float32(1.5), np.float32(2.5)),
    "maximum i32 f32": lambda: F.maximum(T([1, 2]), np.float32(1.5)),
    "i32 + f16": lambda: T([1, 2]) + np.float16(1.5),
    "f16 + f32": lambda: T([1, 2], dtype="float16") + np.float32(1.5),
    "i16 + i32": lambda: T([30000], dtype="int16") + np.int32(10000),
    "i8 * i32": lambda: T([100], dtype="int8") * np.int32(3),
    "i8 + i16": lambda: T([1, 2], dtype="int8") + np.int16(3),
    "i16 + i64": lambda: T([1, 2], dtype="int16") + np.int64(3),
    "f16 + f64": lambda: T([1, 2], dtype="float16") + np.float64(1.5),
    "i32 + f64": lambda: T([1, 2]) + np.float64(0.5),
    "f32 + i32": lambda: T([1.5, 2.5]) + np.int32(1),
    "f16 + i32": lambda: T([1.5, 2.5], dtype="float16") + np.int32(1),
    "bool & bool_": lambda: T([True, False]) & np.bool_(True),
    "bool + i32": lambda: T([True, False]) + np.int32(2),
}
for name, fn in cases.items():
    try:
        y = fn()
        print(f"{name}: {y.dtype} {np.round(y.numpy().astype('float64'), 4).tolist()}")
    except Exception as e:
        print(f"{name}: {type(e).__name__}")
a = T([1, 2])
a += np.float32(0.5)
print(f"i32 += f32: {a.dtype} {a.numpy().tolist()}")
for dtype in ("int32", "float32", "bool"):
    try:
        y = ~T([1, 0], dtype=dtype)
        print(f"~{dtype}: {y.dtype} {y.numpy().tolist()}")
    except TypeError:
        print(f"~{dtype}: TypeError")
