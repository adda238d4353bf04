"""Run in the megref chroot (from its folder) after megtrace wrote mt_numpy_scalars.pkl there:

    import numpy as np, megtrace as mge
    mge.save({"best_acc": np.float32(2.5), "epoch": np.int64(3), "flag": np.bool_(True),
              "h": np.float16(1.5), "names": np.array(["a", "bc"]), "dt": np.dtype("float32")},
             "mt_numpy_scalars.pkl")

Real MegEngine 1.13 (NumPy 1.23) loads it (checked; NumPy 2's own pickles of scalars and
string arrays name numpy._core, which it cannot import). Output:

  best_acc float32 2.5
  dt dtype[float32] float32
  epoch int64 3
  flag bool_ True
  h float16 1.5
  names ndarray ['a', 'bc']
"""
import megengine as mge

for key, value in sorted(mge.load("mt_numpy_scalars.pkl").items()):
    print(key, type(value).__name__, value.tolist() if hasattr(value, "tolist") else value)
