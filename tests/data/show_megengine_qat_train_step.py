"""Golden data for tests/test_qat_train_step.py, made by real MegEngine 1.13:
    /work/shared/megref/mpy tests/data/show_megengine_qat_train_step.py
(writes qat_train_step.npz next to this file). What MegEngine/Models' quantization
ResNet and MobileNetV2 use in QAT training with ema_fakequant_qconfig: ConvBnRelu2d, a
depthwise ConvBn2d without bias (the grouped weight folding), Elemwise FUSE_ADD_RELU,
a float Linear (disable_quantize), QuantStub/DequantStub; two train-mode steps with
cross_entropy(label_smooth=0.1), their parameter gradients and SGD updates.
Output on 1.13.0, CPU:

  losses [1.9097652435302734, 1.680269479751587]
  wrote 66 arrays
"""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
import megengine.optimizer as optim
from megengine.autodiff import GradManager
from megengine.quantization import ema_fakequant_qconfig
from megengine.quantization.quantize import quantize_qat

rng = np.random.RandomState(7)
out = {}


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.conv1 = M.ConvBnRelu2d(3, 8, 3, padding=1, bias=False)
        self.dw = M.ConvBn2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.add = M.Elemwise("FUSE_ADD_RELU")
        self.dequant = M.DequantStub()
        self.fc = M.Linear(8, 4)
        self.fc.disable_quantize()

    def forward(self, x):
        x = self.quant(x)
        y = self.conv1(x)
        x = self.add(self.dw(y), y)
        x = F.flatten(F.avg_pool2d(x, 6), 1)
        return self.fc(self.dequant(x))


net = Net()
for key, value in sorted(net.state_dict().items()):
    arr = (rng.randn(*value.shape) * 0.5).astype("float32")
    if "running_var" in key:
        arr = np.abs(arr) + 0.5
    out["init." + key] = arr
net.load_state_dict({k[5:]: v for k, v in out.items() if k.startswith("init.")})
quantize_qat(net, qconfig=ema_fakequant_qconfig)
net.train()
out["x"] = (rng.randn(2, 3, 6, 6) * 3).astype("float32")
out["label"] = np.array([1, 3], "int32")
gm = GradManager().attach(net.parameters())
opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
losses = []
for step in range(2):
    with gm:
        logits = net(mge.tensor(out["x"]))
        loss = F.loss.cross_entropy(logits, mge.tensor(out["label"]), label_smooth=0.1)
        gm.backward(loss)
    out[f"logits{step}"] = logits.numpy()
    out[f"loss{step}"] = loss.numpy()
    for name, p in net.named_parameters():
        out[f"grad{step}.{name}"] = p.grad.numpy()
    opt.step().clear_grad()
for key, value in net.state_dict().items():
    out["final." + key] = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "qat_train_step.npz"), **out)
print("losses", [float(out[f"loss{s}"]) for s in range(2)])
print("wrote", len(out), "arrays")
