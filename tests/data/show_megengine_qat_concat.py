"""QAT Concat's observers, shown by MegEngine 1.13 itself (run with
/work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  keys ['cat.act_observer.max_val', 'cat.act_observer.min_val', 'cat.act_observer.momentum', 'cat.act_observer.runtime_momentum', 'cat.weight_observer.max_val', 'cat.weight_observer.min_val']
  with_weight True weight dtype None False MinMaxObserver FakeQuantize
  weight observer 3.4028235e+38 -3.4028235e+38
  reset TQT NoneType
  quantized Concat (2, 4, 2, 2)

MegEngine's qat.Concat, unlike Elemwise and QuantStub, does not set with_weight = False: it
has a weight observer and fake quantizer it never uses, and they are in its state dict.
(megtrace prints the same with `megtrace` imported instead.)
"""
import numpy as np
try:
    import megengine as mge, megengine.module as M
    from megengine.quantization import quantize_qat, quantize, reset_qconfig, tqt_qconfig
except ImportError:
    import megtrace as mge, megtrace.module as M
    from megtrace.quantization import quantize_qat, quantize, reset_qconfig, tqt_qconfig


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.q = M.QuantStub(); self.c = M.Conv2d(3, 2, 1); self.cat = M.Concat(); self.dq = M.DequantStub()

    def forward(self, x):
        y = self.c(self.q(x))
        return self.dq(self.cat([y, y], axis=1))


x = mge.tensor(np.linspace(-1, 1, 2 * 3 * 2 * 2, dtype="float32").reshape(2, 3, 2, 2))
q = quantize_qat(Net())
q(x)
print("keys", [k for k in q.state_dict() if k.startswith("cat.")])
print("with_weight", q.cat.with_weight, "weight dtype None", q.cat.get_weight_dtype() is None,
      type(q.cat.weight_observer).__name__, type(q.cat.weight_fake_quant).__name__)
print("weight observer", q.cat.weight_observer.min_val.numpy(), q.cat.weight_observer.max_val.numpy())
r = reset_qconfig(q, tqt_qconfig, inplace=False)
print("reset", type(r.cat.weight_fake_quant).__name__, type(r.cat.weight_observer).__name__)
q.eval()
z = quantize(q)
z.eval()
print("quantized", type(z.cat).__name__, z(x).shape)
