"""What the deprecated Module.zero_grad does in MegEngine 1.13, as
tests/test_module.py asserts it (run with /work/shared/megref/mpy; prints, writes
nothing). Output on 1.13.0, CPU:

  before: [[1.0], [[1.0, 2.0]]]
  after: [[0.0], [[0.0, 0.0]]] same objects True
  DeprecationWarning: Call to deprecated method zero_grad. -- Deprecated since version 1.0.
  DeprecationWarning: Call to deprecated method reset_zero. (use ``*= 0`` instead) -- Deprecated since version 1.0.
  DeprecationWarning: Call to deprecated method reset_zero. (use ``*= 0`` instead) -- Deprecated since version 1.0.
  no grads: [None, None] ['DeprecationWarning: Call to deprecated method zero_grad. -- Deprecated since version 1.0.']

So it still works: each existing grad is zeroed in place by Tensor.reset_zero (itself
deprecated, one warning per grad) and a missing grad stays None.
"""
import warnings

import megengine as mge
import megengine.module as M
from megengine.autodiff import GradManager

net = M.Linear(2, 1)
gm = GradManager().attach(net.parameters())
with gm:
    gm.backward(net(mge.Tensor([[1.0, 2.0]])).sum())
print("before:", [p.grad.numpy().tolist() for p in net.parameters()])
grads = [p.grad for p in net.parameters()]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    net.zero_grad()
print("after:", [p.grad.numpy().tolist() for p in net.parameters()],
      "same objects", all(p.grad is g for p, g in zip(net.parameters(), grads)))
for w in caught:
    print(f"{w.category.__name__}: {w.message}")
fresh = M.Linear(2, 1)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fresh.zero_grad()
print("no grads:", [p.grad for p in fresh.parameters()],
      [f"{w.category.__name__}: {w.message}" for w in caught])
