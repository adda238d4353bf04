"""The quantizable network of tests/data/make_megengine_quantized_dumps.py, built in
megtrace from the same float weights and calibrated the same way (QAT observers, then
`quantize`), so that its quantized weights and scales are real MegEngine's."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.core.tensor.dtype import qint8
from megtrace.quantization import quantize, quantize_qat
from megtrace.quantization.quantize import disable_observer, enable_observer

DATA = Path(__file__).parent / "data" / "quantized_dumps"


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.stem = M.ConvBnRelu2d(3, 8, 3, padding=1)
        self.conv1 = M.ConvBnRelu2d(8, 8, 3, padding=1)
        self.conv2 = M.ConvBn2d(8, 8, 3, padding=1)
        self.add_relu = M.Elemwise("fuse_add_relu")
        self.pool = M.MaxPool2d(2)
        self.dw = M.ConvBnRelu2d(8, 8, 3, padding=1, groups=8)
        self.pw = M.ConvBn2d(8, 8, 1)
        self.avg = M.AvgPool2d(2)
        self.cat = M.Concat()
        self.fc = M.Linear(16 * 2 * 2, 10)
        self.dequant = M.DequantStub()

    def logits(self, x):
        x = self.quant(x)
        x = self.stem(x)
        x = self.add_relu(self.conv2(self.conv1(x)), x)
        x = self.pool(x)
        y = self.pw(self.dw(x))
        x = self.avg(self.cat([x, y], 1))
        return self.fc(F.flatten(x, 1))

    def forward(self, x):
        return self.dequant(self.logits(x))


class Block(M.Module):
    """ResNet's BasicBlock, quantizable."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = M.ConvBnRelu2d(cin, cout, 3, stride, padding=1)
        self.conv2 = M.ConvBn2d(cout, cout, 3, padding=1)
        self.down = M.ConvBn2d(cin, cout, 1, stride) if stride != 1 or cin != cout else None
        self.add_relu = M.Elemwise("fuse_add_relu")

    def forward(self, x):
        skip = x if self.down is None else self.down(x)
        return self.add_relu(self.conv2(self.conv1(x)), skip)


class ResNet(M.Module):
    """A small ResNet-18-like network (three stages of BasicBlocks, 16-32-64 channels)."""

    def __init__(self):
        super().__init__()
        self.quant = M.QuantStub()
        self.stem = M.ConvBnRelu2d(3, 16, 3, padding=1)
        self.pool = M.MaxPool2d(3, 2, 1)
        self.layers = M.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.avg = M.AvgPool2d(4)
        self.fc = M.Linear(64, 10)
        self.dequant = M.DequantStub()

    def logits(self, x):
        x = self.avg(self.layers(self.pool(self.stem(self.quant(x)))))
        return self.fc(F.flatten(x, 1))

    def forward(self, x):
        return self.dequant(self.logits(x))


MODELS = {"net": Net, "resnet": ResNet}


def golden(tag: str = "net") -> dict:
    with np.load(DATA / f"{tag}.npz") as z:
        return {k: z[k] for k in z.files}


def quantized_net(gold: dict | None = None, tag: str = "net") -> M.Module:
    """The converted network, its weights and scales as real MegEngine's."""
    gold = gold or golden(tag)
    net = MODELS[tag]()
    for name, p in net.named_parameters():
        p[...] = gold["init." + name]
    for name, b in net.named_buffers():
        b[...] = gold["init." + name]
    net.eval()
    quantize_qat(net)
    enable_observer(net)
    for xb in gold["calib"]:
        net(mge.tensor(xb))
    disable_observer(net)
    quantize(net)
    net.eval()
    # the activation scales real MegEngine's observers computed: its float convolutions
    # sum in another order, so a few observed ranges (and scales) differ in the last bit
    for name, mod in net.named_modules():
        if "odt." + name in gold:
            mod.output_dtype = qint8(float(gold["odt." + name]))
    return net
