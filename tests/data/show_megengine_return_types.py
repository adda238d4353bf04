"""The container F.split and F.meshgrid return in MegEngine 1.13, as
tests/test_elemtensor_functional.py asserts it (run with /work/shared/megref/mpy;
prints, writes nothing). Output on 1.13.0, CPU:

  split(x, 2, axis=1): tuple
  split(x, [1, 3], axis=1): tuple
  meshgrid(a, b): tuple
  meshgrid(a, indexing='ij'): tuple
"""
import megengine as mge
import megengine.functional as F

x = mge.tensor([[1.0, 2.0, 3.0, 4.0]])
print("split(x, 2, axis=1):", type(F.split(x, 2, axis=1)).__name__)
print("split(x, [1, 3], axis=1):", type(F.split(x, [1, 3], axis=1)).__name__)
print("meshgrid(a, b):", type(F.meshgrid(mge.tensor([1, 2]), mge.tensor([3, 4, 5]))).__name__)
print("meshgrid(a, indexing='ij'):", type(F.meshgrid(mge.tensor([1, 2]), indexing="ij")).__name__)
