"""Golden data for tests/test_quantized_trace.py's QAT-dump tests, made by real MegEngine 1.13:
    /work/shared/megref/mpy tests/data/make_megengine_qat_dumps.py
A small QAT network (QuantStub, ConvBnRelu2d, Conv2d, Elemwise("add"), Linear, DequantStub)
with each fake quantizer MegEngine has: FakeQuantize (ema_fakequant_qconfig), TQT
(tqt_qconfig, log2 thresholds set to -4) and LSQ (an LSQ qconfig with MinMax observers,
step sizes set to 0.05). Each is calibrated on
one batch, put in eval mode, traced with capture_as_const and dumped (FBS_V2, defaults), so
the graph holds MegEngine's FakeQuant / TQT / LSQ oprs (qat_dumps/<name>.mge; FakeQuant also as
FBS: fake_quant_v1.mge); qat_dumps/
<name>.npz holds the input `x`, the eager QAT output `y` and the opr types of the dump."""
import os
import sys
import types
from functools import partial

import numpy as np

try:            # the chroot's OpenCV may lack libGL; MegEngine only needs it for transforms
    import cv2  # noqa: F401
except ImportError:
    _cv2 = types.ModuleType("cv2")
    _cv2.__getattr__ = lambda name: 0
    sys.modules["cv2"] = _cv2

import megengine as mge  # noqa: E402
import megengine.module as M  # noqa: E402
from megengine.jit import trace  # noqa: E402
from megengine.quantization import (LSQ, MinMaxObserver, QConfig, TQT,  # noqa: E402
                                    ema_fakequant_qconfig, quantize_qat, tqt_qconfig)
from megengine.utils.network import Network  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qat_dumps")


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.c1 = M.ConvBnRelu2d(3, 4, 3, padding=1)
        self.c2 = M.Conv2d(4, 4, 1)
        self.add = M.Elemwise("add")
        self.fc = M.Linear(4 * 4 * 4, 5)
        self.dequant = M.DequantStub()

    def forward(self, x):
        a = self.c1(self.quant(x))
        y = self.add(self.c2(a), a)
        return self.dequant(self.fc(y.reshape(y.shape[0], -1)))


lsq_qconfig = QConfig(weight_observer=partial(MinMaxObserver, dtype="qint8_narrow"),
                      act_observer=partial(MinMaxObserver, dtype="qint8"),
                      weight_fake_quant=partial(LSQ, dtype="qint8_narrow"),
                      act_fake_quant=partial(LSQ, dtype="qint8"))
CONFIGS = {"fake_quant": ema_fakequant_qconfig, "tqt": tqt_qconfig, "lsq": lsq_qconfig}

os.makedirs(HERE, exist_ok=True)
for name, qconfig in CONFIGS.items():
    rng = np.random.RandomState(3)
    net = Net()
    for p in net.parameters():
        p._reset(mge.tensor(rng.uniform(-1, 1, p.shape).astype("float32")))
    x = rng.uniform(-2, 2, (2, 3, 4, 4)).astype("float32")
    qat = quantize_qat(net, qconfig=qconfig)
    for m in qat.modules():       # learned thresholds away from their initial 2^0 and 1.0
        if isinstance(m, TQT):
            m.scale._reset(mge.tensor(-4.0))
        if isinstance(m, LSQ):
            m.step_size._reset(mge.tensor(0.05))
    qat(mge.tensor(x))
    qat.eval()
    y = qat(mge.tensor(x)).numpy()

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return qat(data)

    infer(mge.tensor(x))
    path = os.path.join(HERE, name + ".mge")
    infer.dump(path, arg_names=["data"])
    if name == "fake_quant":
        infer.dump(os.path.join(HERE, name + "_v1.mge"), arg_names=["data"], dump_format="FBS")
    oprs = sorted({o.type for o in Network.load(path).all_oprs})
    np.savez(os.path.join(HERE, name + ".npz"), x=x, y=y, oprs=np.array(oprs))
    print(name, oprs, y.ravel()[:4])
