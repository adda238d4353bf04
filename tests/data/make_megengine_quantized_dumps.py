"""Golden data for tests/test_quantized_trace.py, made by real MegEngine 1.13:
    /work/shared/megref/mpy tests/data/make_megengine_quantized_dumps.py
A quantizable ResNet/MobileNet-style network (QuantStub, ConvBnRelu2d, a residual block
whose skip is added by Elemwise("fuse_add_relu"), a depthwise ConvBnRelu2d, ConvBn2d,
MaxPool2d, AvgPool2d, Concat, flatten, Linear, DequantStub) is calibrated with QAT,
converted by `quantize`, run eagerly, traced with capture_as_const and dumped as FBS_V2
and FBS (quantized_dumps/net_v2.mge, net_v1.mge; dumped with the defaults, so
optimize_for_inference ran and left the quantized oprs as traced). quantized_dumps/net.npz
holds the float initial weights, the calibration and evaluation inputs, the activation
scales MegEngine's observers chose (`odt.<module>`), the converted weights as integers,
and the eager outputs of the quantized net (dequantized floats `eager_y`, and the qint8
integers before DequantStub `eager_q`). The same for a small ResNet-18-like network
(BasicBlocks with 1x1 strided downsampling convolutions: resnet*.mge, resnet.npz)."""
import os
import sys
import types

import numpy as np

try:            # the chroot's OpenCV may lack libGL; MegEngine only needs it for transforms
    import cv2  # noqa: F401
except ImportError:
    _cv2 = types.ModuleType("cv2")
    _cv2.__getattr__ = lambda name: 0
    sys.modules["cv2"] = _cv2

import megengine as mge  # noqa: E402
import megengine.functional as F  # noqa: E402
import megengine.module as M  # noqa: E402
from megengine.jit import trace  # noqa: E402
from megengine.quantization import quantize, quantize_qat  # noqa: E402
from megengine.quantization.quantize import disable_observer, enable_observer  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantized_dumps")


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
    """ResNet's BasicBlock, quantizable (MegEngine's official quantized ResNet shape)."""

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


def main():
    make(Net(), "net", (2, 3, 8, 8), seed=7)
    make(ResNet(), "resnet", (2, 3, 32, 32), seed=11)


def make(net, tag, shape, seed):
    rng = np.random.RandomState(seed)
    out = {}
    for name, p in net.named_parameters():
        p[...] = rng.normal(scale=0.3, size=p.shape).astype(np.float32)
        out["init." + name] = p.numpy()
    for name, bf in net.named_buffers():
        if "running_var" in name:
            bf[...] = rng.uniform(0.5, 1.5, bf.shape).astype(np.float32)
        elif "running_mean" in name:
            bf[...] = rng.normal(scale=0.1, size=bf.shape).astype(np.float32)
        out["init." + name] = bf.numpy()
    net.eval()
    quantize_qat(net)
    enable_observer(net)
    calib = rng.normal(size=(3,) + shape).astype(np.float32)
    out["calib"] = calib
    for xb in calib:
        net(mge.tensor(xb))
    disable_observer(net)
    quantize(net)
    net.eval()
    x = rng.normal(size=shape).astype(np.float32)
    out["x"] = x
    out["eager_y"] = net(mge.tensor(x)).numpy()
    for name, mod in net.named_modules():      # activation scales (output dtypes)
        odt = getattr(mod, "output_dtype", None)
        if odt is not None and odt.metadata:
            out["odt." + name] = np.float64(odt.metadata["mgb_dtype"]["scale"])
    for name, p in net.named_parameters():      # the converted weights, as integers
        v = p.numpy()
        out["q." + name] = v.view(np.dtype(v.dtype.str))
        if v.dtype.metadata:
            out["q_scale." + name] = np.float32(v.dtype.metadata["mgb_dtype"]["scale"])

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    infer(mge.tensor(x))
    infer.dump(os.path.join(HERE, f"{tag}_v2.mge"), arg_names=["data"], output_names=["y"],
               dump_format="FBS_V2")
    infer.dump(os.path.join(HERE, f"{tag}_v1.mge"), arg_names=["data"], output_names=["y"],
               dump_format="FBS")

    from megengine.utils.network import Network
    for fmt in ("v2", "v1"):        # what was written, opr by opr
        net_ = Network.load(os.path.join(HERE, f"{tag}_{fmt}.mge"))
        print(tag, fmt, [(o.type, o.name) for o in net_.all_oprs])
    q = net.logits(mge.tensor(x)).numpy()      # the integers before DequantStub
    out["eager_q"] = q.view(np.dtype(q.dtype.str))
    np.savez(os.path.join(HERE, f"{tag}.npz"), **out)
    print("wrote", len(out), "arrays")


if __name__ == "__main__":
    main()
