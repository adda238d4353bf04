"""The dropout stream facts tests/test_random_oprs.py asserts, shown by MegEngine 1.13
itself (run with /work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  own stream (a==b): True  advances (a!=c): True
  uniform unaffected by dropout: True
  mask values [0. 2.]
"""
import numpy as np, megengine as mge, megengine.functional as F, megengine.random as R
x = mge.tensor(np.ones(16, "float32"))
R.seed(3); a = F.nn.dropout(x, 0.5).numpy()
R.seed(3); R.uniform(size=(4,)); R.permutation(5); b = F.nn.dropout(x, 0.5).numpy()
R.seed(3); F.nn.dropout(x, 0.5); c = F.nn.dropout(x, 0.5).numpy()
print("own stream (a==b):", np.array_equal(a, b), " advances (a!=c):", not np.array_equal(a, c))
R.seed(3); u1 = R.uniform(size=(4,)).numpy()
R.seed(3); F.nn.dropout(x, 0.5); u2 = R.uniform(size=(4,)).numpy()
print("uniform unaffected by dropout:", np.array_equal(u1, u2))
print("mask values", np.unique(a))
