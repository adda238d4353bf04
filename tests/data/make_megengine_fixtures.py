"""Regenerate the small MobileNetV2 fixture with the real MegEngine 1.13 (run in the megref
chroot: `../shared/megref/mpy tests/data/make_megengine_fixtures.py`).

Writes megengine-1.13/mobilenetv2_fuse.mge (traced at batch 1 with
`trace(symbolic=True, capture_as_const=True)`, dumped with
`enable_fuse_conv_bias_nonlinearity=True`), mobilenetv2_in_b1.npy and mobilenetv2_out_b1.npy:
MobileNetV2 (ReLU6, depthwise convolutions, mean over H,W) at width 0.25, 10 classes and
64x64 inputs, so the files stay small. The mlp/convnet files beside them are copies of the
MegEngine 1.13 dumps described in README.md."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.jit import trace
from megengine.utils.comp_graph_tools import GraphInference

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine-1.13")


class ReLU6(M.Module):
    # F.relu6, not F.clip(x, 0, 6): MegEngine 1.13 dumps that clip so that the reloaded
    # graph outputs zeros (checked with GraphInference and MegEngine Lite).
    def forward(self, x):
        return F.relu6(x)


class InvertedResidual(M.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers += [M.Conv2d(inp, hidden, 1, bias=False), M.BatchNorm2d(hidden), ReLU6()]
        layers += [M.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                   M.BatchNorm2d(hidden), ReLU6(),
                   M.Conv2d(hidden, oup, 1, bias=False), M.BatchNorm2d(oup)]
        self.conv = M.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(M.Module):
    def __init__(self, num_classes=10, width_mult=0.25, last_channel=256):
        super().__init__()
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        in_c = int(32 * width_mult)
        features = [M.Conv2d(3, in_c, 3, 2, 1, bias=False), M.BatchNorm2d(in_c), ReLU6()]
        for t, c, n, s in settings:
            out_c = int(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(in_c, out_c, s if i == 0 else 1, t))
                in_c = out_c
        features += [M.Conv2d(in_c, last_channel, 1, bias=False),
                     M.BatchNorm2d(last_channel), ReLU6()]
        self.features = M.Sequential(*features)
        self.classifier = M.Linear(last_channel, num_classes)

    def forward(self, x):
        return self.classifier(F.mean(self.features(x), axis=(2, 3)))


def main():
    np.random.seed(0)
    net = MobileNetV2()
    for m in net.modules():
        # He-scaled weights keep activations O(1) through 50 layers (MegEngine's default init
        # lets them shrink towards denormals, which its compiled graph flushes to zero), and
        # non-trivial BatchNorm statistics exercise folding.
        if isinstance(m, (M.Conv2d, M.Linear)):
            w = m.weight.numpy()
            fan_in = w[0].size if isinstance(m, M.Linear) else np.prod(w.shape[-3:])
            m.weight[...] = mge.tensor(
                (np.random.normal(size=w.shape) * np.sqrt(2.0 / fan_in)).astype("float32"))
        if isinstance(m, M.BatchNorm2d):
            shape = m.running_mean.shape
            m.running_mean[...] = mge.tensor(np.random.normal(size=shape).astype("float32") * 0.1)
            m.running_var[...] = mge.tensor(
                np.random.uniform(0.5, 1.5, size=shape).astype("float32"))
    net.eval()
    x = np.random.rand(1, 3, 64, 64).astype("float32")

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    want = infer(mge.tensor(x)).numpy()
    eager = net(mge.tensor(x)).numpy()
    assert np.abs(want - eager).max() <= 1e-5 * np.abs(eager).max()
    path = os.path.join(OUT, "mobilenetv2_fuse.mge")
    infer.dump(path, arg_names=["data"], output_names=["out"],
               enable_fuse_conv_bias_nonlinearity=True)
    reloaded = GraphInference(path).run(x)["out"]
    assert np.abs(reloaded - eager).max() <= 1e-5 * np.abs(eager).max()
    np.save(os.path.join(OUT, "mobilenetv2_in_b1.npy"), x)
    np.save(os.path.join(OUT, "mobilenetv2_out_b1.npy"), eager)
    print("mobilenetv2", want.shape, os.path.getsize(os.path.join(OUT, "mobilenetv2_fuse.mge")))


if __name__ == "__main__":
    main()
