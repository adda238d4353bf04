"""Small API facts of MegEngine 1.13 (run with /work/shared/megref/mpy). Output on 1.13.0, CPU:

  Tensor(None): (0,) float32
  Tensor(None, int32): (0,) int32
  set_value: ['DeprecationWarning'] [3.0, 4.0]
  permutation(dtype=np.int32): int32 [0, 1, 2, 3, 4]
  F.utils.copy: [3.0, 4.0] warnings 0
  to(_borrow=False): [3.0, 4.0]
  max_recursion_limit: True restored True
  deprecated_func: [2.0] ['Call to deprecated function abs. (use megengine.functional.abs instead) -- Deprecated since version 1.3.']
"""
import sys
import warnings

import numpy as np
import megengine as mge
import megengine.functional as F
import megengine.random as R
from megengine.utils.deprecation import deprecated_func
from megengine.utils.max_recursion_limit import max_recursion_limit

t = mge.Tensor(None)
print(f"Tensor(None): {t.shape} {t.dtype}")
t = mge.Tensor(None, dtype="int32")
print(f"Tensor(None, int32): {t.shape} {t.dtype}")
x = mge.tensor([1.0, 2.0])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x.set_value(mge.tensor([3.0, 4.0]))
print(f"set_value: {[w.category.__name__ for w in caught]} {x.numpy().tolist()}")
p = R.permutation(5, dtype=np.int32)
print(f"permutation(dtype=np.int32): {p.dtype} {sorted(p.numpy().tolist())}")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    c = F.utils.copy(x, "cpu0")
print(f"F.utils.copy: {c.numpy().tolist()} warnings {len(caught)}")
print(f"to(_borrow=False): {x.to('cpu0', _borrow=False).numpy().tolist()}")
before = sys.getrecursionlimit()
with max_recursion_limit():
    with max_recursion_limit():
        inside = sys.getrecursionlimit()
print(f"max_recursion_limit: {inside > 100000} restored {sys.getrecursionlimit() == before}")
old_abs = deprecated_func("1.3", "megengine.functional", "abs", False)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = old_abs(mge.tensor([-2.0]))
print(f"deprecated_func: {y.numpy().tolist()} {[str(w.message) for w in caught]}")
