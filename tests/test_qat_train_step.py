"""One QAT training step with ema_fakequant_qconfig against real MegEngine 1.13 (golden
data made by tests/data/show_megengine_qat_train_step.py): the modules MegEngine/Models'
quantization ResNet and MobileNetV2 train with (ConvBnRelu2d, depthwise ConvBn2d without
bias, Elemwise FUSE_ADD_RELU, a float Linear), first-batch EMA observers, train-mode BN
folding, the parameter gradients and the SGD update."""
from __future__ import annotations

import pathlib

import numpy as np

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.optimizer as optim
from megtrace.autodiff import GradManager
from megtrace.quantization import ema_fakequant_qconfig
from megtrace.quantization.quantize import quantize_qat

GOLD = np.load(pathlib.Path(__file__).parent / "data" / "qat_train_step.npz")


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


def test_qat_train_steps_match_megengine():
    net = Net()
    net.load_state_dict({k[len("init."):]: GOLD[k] for k in GOLD.files if k.startswith("init.")})
    quantize_qat(net, qconfig=ema_fakequant_qconfig)
    net.train()
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for step in range(2):
        with gm:
            logits = net(mge.tensor(GOLD["x"]))
            loss = F.loss.cross_entropy(logits, mge.tensor(GOLD["label"]), label_smooth=0.1)
            gm.backward(loss)
        np.testing.assert_allclose(logits.numpy(), GOLD[f"logits{step}"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss.numpy(), GOLD[f"loss{step}"], rtol=1e-6)
        for name, p in net.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), GOLD[f"grad{step}.{name}"], rtol=1e-4,
                                       atol=1e-5, err_msg=f"step {step} grad of {name}")
        opt.step().clear_grad()
    for key, value in net.state_dict().items():
        np.testing.assert_allclose(np.asarray(value.numpy() if hasattr(value, "numpy") else value),
                                   GOLD["final." + key], rtol=1e-5, atol=1e-6, err_msg=key)
