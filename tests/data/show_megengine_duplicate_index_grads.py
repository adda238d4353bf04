"""Gradients of values written twice to one element, as MegEngine 1.13 gives them
(tests/autodiff/test_grad_manager.py asserts them; run with /work/shared/megref/mpy;
prints, writes nothing). Output on 1.13.0, CPU:

  setitem x.grad [1.0, 0.0, 100.0] v.grad [10.0, 10.0]
  scatter x.grad [[0.0, 0.0, 3.0]] s.grad [[1.0, 1.0, 2.0]]

Each written value gets the gradient of the element it was written to, the write that
was overwritten too (a gather of dy), not only the one that stayed.
"""
import megengine as mge
import megengine.functional as F
from megengine.autodiff import GradManager

T = mge.Tensor
x, v = T([1., 2., 3.]), T([5., 6.])
gm = GradManager().attach([x, v])
with gm:
    y = x * 1
    y[T([1, 1], dtype="int32")] = v
    gm.backward((y * T([1., 10., 100.])).sum())
print("setitem x.grad", x.grad.numpy().tolist(), "v.grad", v.grad.numpy().tolist())
x, s = T([[1., 2., 3.]]), T([[10., 20., 30.]])
gm = GradManager().attach([x, s])
with gm:
    y = F.scatter(x * 1, 1, T([[0, 0, 1]], dtype="int32"), s)
    gm.backward((y * T([[1., 2., 3.]])).sum())
print("scatter x.grad", x.grad.numpy().tolist(), "s.grad", s.grad.numpy().tolist())
