"""Real MegEngine 1.13's enable_hwcd4 and (uint8) enable_fuse_preprocess dumps, as golden
data: run in the megref chroot from the checkout,
`../shared/megref/mpy tests/data/make_megengine_hwcd4_preprocess.py`.

Into megengine_hwcd4/: for tests/zoo_models' ResNet-18-like and MobileNetV2-like
(make_megengine_optimize_options.py's models, weights of this run; the conv net's hwcd4
dump is megengine_optimize/convnet2_enable_hwcd4.mge), the enable_hwcd4 dump with its
input and MegEngine's eager float32 output (<name>_io.npz); for PreNet (a uint8 image
warped by WarpPerspective, cast to float32 and normalised before a convolution, the
preprocessing MegEngine's FuseWarpPerspectiveDimshufflePass fuses), its dumps without and
with enable_fuse_preprocess and its io: `out` eager MegEngine, `out_unrounded` eager
MegEngine on the image cast to float32 first -- what the fused WarpPerspective (uint8 in,
float32 out, megdnn's kern_naive_dimshuffle_typecvt: no rounding to uint8) computes."""
import io
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_megengine_optimize_options as base  # noqa: E402  (aliases megtrace -> megengine)

import megengine  # noqa: E402
import megengine.functional as F  # noqa: E402
import megengine.module as M  # noqa: E402
from megengine.jit import trace  # noqa: E402

from zoo_models import FAMILIES  # noqa: E402

OUT = os.path.join(HERE, "megengine_hwcd4")


class PreNet(M.Module):
    """uint8 NCHW image -> WarpPerspective -> float32 -> (x - mean) / std -> conv."""

    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 8, 3, padding=1)
        self.mean = megengine.tensor(np.array([103.5, 116.3, 123.7], np.float32)
                                     .reshape(1, 3, 1, 1))
        self.std = megengine.tensor(np.array([57.4, 57.1, 58.4], np.float32)
                                    .reshape(1, 3, 1, 1))

    def forward(self, data, mat):
        x = F.vision.warp_perspective(data, mat, (16, 16))
        x = (x.astype("float32") - self.mean) / self.std
        return F.relu(self.conv(x))


class PreNetNHWC(PreNet):
    """The same on an NHWC image: warp in NHWC, Dimshuffle to NCHW, then float32."""

    def forward(self, data, mat):
        x = F.vision.warp_perspective(data, mat, (16, 16), format="NHWC")
        x = (x.transpose(0, 3, 1, 2).astype("float32") - self.mean) / self.std
        return F.relu(self.conv(x))


def _dump(infer, names, **kwargs) -> bytes:
    buf = io.BytesIO()
    infer.dump(buf, arg_names=names, **kwargs)
    return buf.getvalue()


def hwcd4(rng):
    models = [(n, FAMILIES[n][0](), (1, 3, 64, 64)) for n in ("resnet", "mobilenet_v2")]
    for name, net, shape in models:
        base._randomize_bn(net, rng)
        net.eval()
        x = rng.normal(size=shape).astype(np.float32)
        want = net(megengine.tensor(x)).numpy()

        @trace(symbolic=True, capture_as_const=True)
        def infer(data):
            return net(data)
        infer(megengine.tensor(x))
        with open(os.path.join(OUT, f"{name}_enable_hwcd4.mge"), "wb") as f:
            f.write(_dump(infer, ["data"], enable_hwcd4=True))
        np.savez(os.path.join(OUT, f"{name}_io.npz"), data=x, out=want)
        print(name, "hwcd4 written")


def preprocess(rng):
    net = PreNet()
    net.eval()
    data = rng.integers(0, 256, size=(1, 3, 20, 20)).astype(np.uint8)
    mat = np.array([[[0.9, 0.1, 1.0], [-0.05, 1.1, 0.5], [0.001, 0.002, 1.0]]], np.float32)
    want = net(megengine.tensor(data), megengine.tensor(mat)).numpy()
    unrounded = net(megengine.tensor(data.astype(np.float32)), megengine.tensor(mat)).numpy()

    @trace(symbolic=True, capture_as_const=True)
    def infer(data, mat):
        return net(data, mat)
    infer(megengine.tensor(data), megengine.tensor(mat))
    for option, kwargs in (("none", {}), ("enable_fuse_preprocess",
                                         {"enable_fuse_preprocess": True})):
        with open(os.path.join(OUT, f"prenet_{option}.mge"), "wb") as f:
            f.write(_dump(infer, ["data", "mat"], **kwargs))
    np.savez(os.path.join(OUT, "prenet_io.npz"), data=data, mat=mat, out=want,
             out_unrounded=unrounded)
    print("prenet written")
    nhwc = PreNetNHWC()
    nhwc.load_state_dict(net.state_dict())
    nhwc.eval()
    data_nhwc = np.ascontiguousarray(data.transpose(0, 2, 3, 1))
    want = nhwc(megengine.tensor(data_nhwc), megengine.tensor(mat)).numpy()

    @trace(symbolic=True, capture_as_const=True)
    def infer_nhwc(data, mat):
        return nhwc(data, mat)
    infer_nhwc(megengine.tensor(data_nhwc), megengine.tensor(mat))
    for option, kwargs in (("none", {}), ("enable_fuse_preprocess",
                                         {"enable_fuse_preprocess": True})):
        with open(os.path.join(OUT, f"prenet_nhwc_{option}.mge"), "wb") as f:
            f.write(_dump(infer_nhwc, ["data", "mat"], **kwargs))
    np.savez(os.path.join(OUT, "prenet_nhwc_io.npz"), data=data_nhwc, mat=mat, out=want)
    print("prenet_nhwc written")


def main():
    os.makedirs(OUT, exist_ok=True)
    np.random.seed(2)
    rng = np.random.default_rng(2)
    hwcd4(rng)
    preprocess(rng)


if __name__ == "__main__":
    main()
