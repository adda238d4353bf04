"""Values a traced function leaves behind, as MegEngine 1.13 keeps them (asserted by
tests/test_trace_late_reads.py; run with /work/shared/megref/mpy; prints, writes nothing).
Output on 1.13.0, CPU (the same for symbolic=False and True):

  box never read before: [7.0, 7.0, 7.0]
  list of features: [[2.0, 2.0], [4.0, 6.0], [6.0, 10.0]] [3.0, 5.0] [1.0, 1.0]
  ema attribute: [[2.0], [4.0], [6.0]] [2.125]

A tensor computed inside the function and still referenced when it returns (a dict or
list outside, a module attribute rebound to a new tensor) holds its value after every
call, and used on the next call it is an input from outside.
"""
import numpy as np
import megengine as mge
import megengine.module as M
from megengine.jit import trace

T = mge.Tensor
for symbolic in (False, True):
    box = {}

    @trace(symbolic=symbolic)
    def f(x):
        box["side"] = x * 3 + 1
        return x * 2
    f(T(np.ones(3, "float32")))
    f(T(np.ones(3, "float32") * 2))
    print("box never read before:", box["side"].numpy().tolist())

    feats = []

    @trace(symbolic=symbolic)
    def g(a):
        b = a + 1
        feats.append(b)
        return b * 2
    outs = [g(T([1., 2.]) * i).numpy().tolist() for i in range(3)]
    print("list of features:", outs, feats[-1].numpy().tolist(), feats[0].numpy().tolist())

    class Ema(M.Module):
        def __init__(self):
            super().__init__()
            self.ema = T([0.0])

        def forward(self, x):
            self.ema = self.ema * 0.5 + x.mean() * 0.5
            return x * 2
    net = Ema()
    h = trace(net, symbolic=symbolic)
    print("ema attribute:", [h(T([float(i)])).numpy().tolist() for i in (1, 2, 3)],
          net.ema.numpy().tolist())
