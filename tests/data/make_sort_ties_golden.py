"""Real MegEngine 1.13's order of equal elements in F.topk / F.argsort / F.sort, the
literals of tests/test_sort_ties.py (run with ../shared/megref/mpy; prints them)."""
import numpy as np
import megengine as mge
import megengine.functional as F

ROW = np.array([2., 1., 1., 1., 1., 0.], "float32")
LONG = np.zeros(2000, "float32")
LONG[::3] = 1

x = mge.tensor(ROW)
print("topk6 desc", F.topk(x, k=6, descending=True)[1].numpy().tolist())
print("topk6 asc", F.topk(x, k=6, descending=False)[1].numpy().tolist())
print("topk3 desc", F.topk(x, k=3, descending=True)[1].numpy().tolist())
print("argsort desc", F.argsort(x, descending=True).numpy().tolist())
print("argsort asc", F.argsort(x, descending=False).numpy().tolist())
print("sort desc", F.sort(x, descending=True)[1].numpy().tolist())
print("long topk5 desc", F.topk(mge.tensor(LONG), k=5, descending=True)[1].numpy().tolist())
print("long topk5 asc", F.topk(mge.tensor(LONG), k=5, descending=False)[1].numpy().tolist())
