"""The gradients at 0 that tests/autodiff/test_grad_manager.py asserts for abs, l1_loss
and leaky_relu, shown by MegEngine 1.13 itself, eager and traced (run with
/work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  trace=None: abs [-1. -1.  1.] l1_loss [-0.5  0.5] leaky_relu [0.1 1.  1. ]
  trace=False: abs [-1. -1.  1.] l1_loss [-0.5  0.5] leaky_relu [0.1 1.  1. ]
  trace=True: abs [-1. -1.  1.] l1_loss [-0.5  0.5] leaky_relu [0.1 1.  1. ]

So abs's gradient is ABS_GRAD's `x > 0 ? g : -g` (-g at 0, where sign would give 0), and
leaky_relu's slope at 0 is 1 (x >= 0 is the positive side).
"""
import numpy as np
import megengine as mge
import megengine.functional as F
from megengine.autodiff import GradManager
from megengine.jit import trace


def grad(fn, *values, symbolic=None):
    xs = [mge.tensor(np.array(v, "float32")) for v in values]
    gm = GradManager().attach(xs[:1])

    def step(*xs):
        with gm:
            gm.backward(fn(*xs).sum())
        return xs[0].grad

    if symbolic is not None:
        step = trace(step, symbolic=symbolic)
    return step(*xs).numpy()


for mode in (None, False, True):
    print(f"trace={mode}:",
          "abs", grad(F.abs, [-1.0, 0.0, 2.0], symbolic=mode),
          "l1_loss", grad(F.nn.l1_loss, [1.0, 3.0], [1.0, 2.0], symbolic=mode),
          "leaky_relu", grad(lambda x: F.leaky_relu(x, 0.1), [-1.0, 0.0, 2.0], symbolic=mode))
