"""The gradient facts tests/autodiff/test_grad_manager.py asserts, shown by MegEngine 1.13
itself (run with /work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  x*w x:default w:nhwc -> y nhwc x.grad default w.grad nhwc
  x*w x:nhwc w:default -> y nhwc x.grad nhwc w.grad default
  x+w x:nhwc w:default -> y nhwc x.grad nhwc w.grad default
  relu(x)*w x:nhwc w:default -> y nhwc x.grad nhwc w.grad default
  sum(x*w) x:nhwc w:nhwc -> y default x.grad nhwc w.grad nhwc
  x+w twice: same object False x.grad [2. 2. 2.] w.grad [2. 2. 2.]
  x+0 twice with dy=2: x.grad [4. 4. 4.] dy [2. 2. 2.]

So a gradient takes the format its tensor has (format.cpp's AttachGrad), whatever the
formats along the way; and each attached tensor gets a gradient object of its own.
"""
import numpy as np
import megengine as mge
import megengine.functional as F
from megengine.autodiff import GradManager

CASES = [("x*w", lambda x, w: x * w, "default", "nhwc"),
         ("x*w", lambda x, w: x * w, "nhwc", "default"),
         ("x+w", lambda x, w: x + w, "nhwc", "default"),
         ("relu(x)*w", lambda x, w: F.relu(x) * w, "nhwc", "default"),
         ("sum(x*w)", lambda x, w: (x * w).sum(), "nhwc", "nhwc")]
for name, fn, fx, fw in CASES:
    x = mge.tensor(np.arange(1, 25, dtype="float32").reshape(1, 2, 3, 4), format=fx)
    w = mge.tensor(np.full((1, 2, 3, 4), 0.5, "float32"), format=fw)
    gm = GradManager().attach([x, w])
    with gm:
        y = fn(x, w)
        gm.backward(y.sum())
    print(f"{name} x:{fx} w:{fw} -> y {y.format} x.grad {x.grad.format} w.grad {w.grad.format}")
x, w = mge.tensor(np.ones(3, "float32")), mge.tensor(np.ones(3, "float32"))
gm = GradManager().attach([x, w])
for _ in range(2):
    with gm:
        gm.backward(x + w)
print("x+w twice: same object", x.grad is w.grad, "x.grad", x.grad.numpy(), "w.grad", w.grad.numpy())
x, dy = mge.tensor(np.ones(3, "float32")), mge.tensor(np.full(3, 2.0, "float32"))
gm = GradManager().attach([x])
for _ in range(2):
    with gm:
        gm.backward(x + 0.0, dy=dy)
print("x+0 twice with dy=2: x.grad", x.grad.numpy(), "dy", dy.numpy())
