"""Real MegEngine 1.13's optimize_for_inference options, as golden data: run in the megref
chroot from the checkout, `../shared/megref/mpy tests/data/make_megengine_optimize_options.py`.

The conv net (megtrace.demo.Net, restated below), tests/zoo_models' ResNet-18-like and
MobileNetV2-like models (imported with `megtrace` aliased to `megengine`, as in
make_zoo_golden.py) are traced and dumped with each option. For every dump, the oprs
MegEngine wrote (read back with megengine.utils.network) are summarized in
megengine_optimize_options.json: per model and option, the count of each opr signature
("type format/compute_mode/data_type/nonlineMode -> output dtypes"), the oprs in order
(type and output shape) and the error text where MegEngine refused the option on CPU.
The conv net's dumps themselves go to megengine_optimize/ (load_graph tests), with its
input and MegEngine's float32 output."""
import collections
import io
import json
import os
import sys

import numpy as np

import megengine
import megengine.functional as F
import megengine.module as M
from megengine.jit import trace
from megengine.utils.network import Network

HERE = os.path.dirname(os.path.abspath(__file__))
sys.modules.update({"megtrace": megengine, "megtrace.functional": F, "megtrace.module": M,
                    "megtrace.module.activation": megengine.module.activation})
sys.path.insert(0, os.path.dirname(HERE))

from zoo_models import FAMILIES  # noqa: E402

OPTIONS = ["none", "enable_io16xc32", "enable_ioc16", "enable_io16xc32+enable_ioc16",
           "enable_fuse_conv_bias_nonlinearity", "enable_fuse_conv_bias_with_z",
           "enable_nchw88", "enable_nchw44", "enable_nchw44_dot", "enable_nchw44+enable_nchw88",
           "enable_nchw4", "enable_nchw32", "enable_chwn4", "enable_nchw64", "enable_hwcd4"]
PARAMS = ("format", "compute_mode", "data_type", "nonlineMode", "mode")
SAVED = ["none", "enable_io16xc32", "enable_ioc16", "enable_nchw88", "enable_nchw44",
         "enable_fuse_conv_bias_with_z"]


class ConvNet(M.Module):
    """megtrace.demo.Net."""

    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 16, 3, padding=1)
        self.bn = M.BatchNorm2d(16)
        self.fc = M.Linear(16 * 16 * 16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(F.flatten(x, 1))


def _randomize_bn(net, rng):
    for m in net.modules():
        if isinstance(m, M.BatchNorm2d):
            shape = m.running_mean.shape
            m.running_mean[...] = megengine.tensor(
                rng.normal(size=shape).astype(np.float32) * 0.1)
            m.running_var[...] = megengine.tensor(
                rng.uniform(0.5, 1.5, size=shape).astype(np.float32))


def _models():
    yield "convnet", ConvNet(), {"data": None}, (1, 3, 32, 32)
    for name in ("resnet", "mobilenet_v2"):
        yield name, FAMILIES[name][0](), {"data": None}, (1, 3, 64, 64)


def _signature(opr) -> str:
    params = {}
    try:
        params = dict(opr.params)
    except Exception:  # noqa: BLE001 -- oprs without a param table
        pass
    shown = " ".join(f"{k}={params[k]}" for k in PARAMS if k in params)
    outs = ",".join(str(np.dtype(v.dtype)) for v in opr.outputs)
    return f"{type(opr).__name__} {shown} -> {outs}".replace("  ", " ")


def _summary(data: bytes) -> dict:
    net = Network.load(io.BytesIO(data))
    oprs = net.all_oprs
    return {"counts": dict(sorted(collections.Counter(_signature(o) for o in oprs).items())),
            "oprs": [[type(o).__name__, [list(v.shape) for v in o.outputs]] for o in oprs]}


def main():
    np.random.seed(0)
    rng = np.random.default_rng(0)
    out = {}
    saved = os.path.join(HERE, "megengine_optimize")
    os.makedirs(saved, exist_ok=True)
    for name, net, _, shape in _models():
        _randomize_bn(net, rng)
        net.eval()
        x = rng.normal(size=shape).astype(np.float32)

        @trace(symbolic=True, capture_as_const=True)
        def infer(data):
            return net(data)
        y = infer(megengine.tensor(x)).numpy()
        out[name] = {}
        if name == "convnet":
            np.savez(os.path.join(saved, "convnet_io.npz"), data=x, out=y)
        for option in OPTIONS:
            kwargs = {k: True for k in option.split("+")} if option != "none" else {}
            buf = io.BytesIO()
            try:
                infer.dump(buf, arg_names=["data"], **kwargs)
            except Exception as e:  # noqa: BLE001 -- MegEngine's refusal is the golden data
                out[name][option] = {"error": f"{type(e).__name__}: {e}"[:400]}
                continue
            data = buf.getvalue()
            out[name][option] = _summary(data)
            if name == "convnet" and option in SAVED:
                with open(os.path.join(saved, f"convnet_{option}.mge"), "wb") as f:
                    f.write(data)
            print(name, option, len(out[name][option]["oprs"]), "oprs")
    with open(os.path.join(HERE, "megengine_optimize_options.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"), sort_keys=True)


if __name__ == "__main__":
    main()
