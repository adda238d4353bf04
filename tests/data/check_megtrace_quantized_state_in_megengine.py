"""A quantized net's state dict saved by megtrace loads in real MegEngine 1.13.

Run it twice from one folder: first with megtrace's Python (writes mt_qstate.pkl and
mt_y.npy), then in the megref chroot (`/work/shared/megref/mpy <this file>`): MegEngine
builds and quantizes the same net, zeroes its int8 weights, loads megtrace's file with
load_state_dict and reproduces both its own output and megtrace's. Output in MegEngine
(before megtrace pickled quantized dtypes as NumPy does, the scales were lost and
load_state_dict raised "expect quantize dtype"):

  dtypes [('conv.bias', 'float32', None), ('conv.weight', 'int8', 0.007691), ('fc.bias', 'float32', None), ('fc.weight', 'int8', 0.007856)]
  max |y - megtrace y| 9.536743e-07 max |y - own y| 0.0
"""
import numpy as np

try:
    import megengine as mge
    import megengine.module as M
    import megengine.quantization as Q
    from megengine.core.tensor import dtype as D
except ImportError:
    import megtrace as mge
    import megtrace.module as M
    import megtrace.quantization as Q
    D = None


def build():
    class Net(M.Module):
        def __init__(self):
            super().__init__()
            self.quant = M.QuantStub()
            self.conv = M.ConvRelu2d(2, 3, 3, padding=1)
            self.fc = M.Linear(3 * 4 * 4, 5)
            self.dequant = M.DequantStub()

        def forward(self, x):
            x = self.conv(self.quant(x))
            return self.dequant(self.fc(x.reshape(x.shape[0], -1)))

    net = Net()
    rng = np.random.RandomState(0)
    for p in (net.conv.weight, net.conv.bias, net.fc.weight, net.fc.bias):
        p._reset(mge.tensor(rng.uniform(-1, 1, p.shape).astype("float32")))
    x = mge.tensor(rng.uniform(-2, 2, (2, 2, 4, 4)).astype("float32"))
    qat = Q.quantize_qat(net)
    qat(x)
    qat.eval()
    z = Q.quantize(qat)
    z.eval()
    return z, x


z, x = build()
if D is None:
    mge.save(z.state_dict(), "mt_qstate.pkl")
    np.save("mt_y.npy", z(x).numpy())
else:
    own = z(x).numpy()
    state = mge.load("mt_qstate.pkl")
    print("dtypes", sorted((k, str(v.dtype), v.dtype.metadata and round(D.get_scale(v.dtype), 6))
                           for k, v in state.items()))
    for p in (z.conv.weight, z.fc.weight):
        p._reset(mge.tensor(np.zeros(p.shape, "int8").astype(p.dtype)))
    z.load_state_dict(state)
    y = z(x).numpy()
    print("max |y - megtrace y|", np.abs(y - np.load("mt_y.npy")).max(),
          "max |y - own y|", np.abs(y - own).max())
