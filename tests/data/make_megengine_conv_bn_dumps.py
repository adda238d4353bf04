"""What MegEngine 1.13 dumps for a biased convolution followed by BatchNorm (run in the
megref chroot from the checkout: `../shared/megref/mpy tests/data/make_megengine_conv_bn_dumps.py`).

optimize_for_inference (MegEngine's default) writes BatchNorm after a biased conv whose
bias minus BN's running mean is zero (both at their initial zeros) as an Elemwise
FUSE_MUL_ADD3 of a scale, Broadcast(conv, GetVarShape(bias, conv)) and a shift: a
GetVarShape of two inputs, whose value is the shape they broadcast to. Two nets (conv(bias)+BN, and
grouped conv(bias)+BN+relu+ConvTranspose), BN scale, shift and variance random, each
dumped with the default options ("opt") and with enable_fuse_conv_bias_nonlinearity
("fuse"); writes megengine_conv_bn/<net>_<opt>.mge and megengine_conv_bn/io.npz
(x and each net's traced output). Prints each dump's GetVarShape oprs by input count.

Printed by MegEngine 1.13:
conv_bn_opt: GetVarShape inputs [2]
conv_bn_fuse: GetVarShape inputs [2]
grouped_bn_deconv_opt: GetVarShape inputs [2]
grouped_bn_deconv_fuse: GetVarShape inputs [2]
"""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.jit import trace
from megengine.utils.network import Network

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_conv_bn")
rng = np.random.RandomState(0)


class ConvBN(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 4, 3, padding=1)
        self.bn = M.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


class GroupedBNDeconv(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 6, 3, groups=3)
        self.bn = M.BatchNorm2d(6)
        self.deconv = M.ConvTranspose2d(6, 2, 2, stride=2)

    def forward(self, x):
        return self.deconv(F.relu(self.bn(self.conv(x))))


def _randomized(net):
    """Random weights, BN affine params and variances; the conv bias and BN's running
    mean keep their initial zeros (as in a freshly initialized net): their difference
    being zero is what makes MegEngine write the Broadcast(GetVarShape(bias, conv))."""
    state = {}
    for k, v in net.state_dict().items():
        v = np.asarray(v)
        if k.endswith(("conv.bias", "running_mean")):
            state[k] = v
            continue
        value = rng.uniform(0.5, 1.5, v.shape) if k.endswith("running_var") else \
            rng.uniform(-1, 1, v.shape)
        state[k] = value.astype(v.dtype)
    net.load_state_dict(state)
    net.eval()                              # MegEngine's eval() returns None
    return net


def main():
    os.makedirs(OUT, exist_ok=True)
    x = rng.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    io = {"x": x}
    for name, cls in (("conv_bn", ConvBN), ("grouped_bn_deconv", GroupedBNDeconv)):
        net = _randomized(cls())
        f = trace(lambda t: net(t), symbolic=True, capture_as_const=True)
        io[name] = f(mge.tensor(x)).numpy()
        for tag, opts in (("opt", {}), ("fuse", {"enable_fuse_conv_bias_nonlinearity": True})):
            path = os.path.join(OUT, f"{name}_{tag}.mge")
            f.dump(path, arg_names=["x"], output_names=["y"], **opts)
            net_file = Network.load(path)
            counts = [len(o.inputs) for o in net_file.all_oprs if o.type == "GetVarShape"]
            print(f"{name}_{tag}: GetVarShape inputs {counts}")
    np.savez(os.path.join(OUT, "io.npz"), **io)


if __name__ == "__main__":
    main()
