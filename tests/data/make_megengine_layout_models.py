"""Real MegEngine 1.13's layout options on tests/layout_models.py (channel padding, blocked
AdaptivePooling/Resize/Concat) and the conv net's dumps with the options
make_megengine_optimize_options.py does not keep, as golden data. Run in the megref chroot
from the checkout: `../shared/megref/mpy tests/data/make_megengine_layout_models.py`.

Writes megengine_layout_models.json: per model and option, the opr summary of
make_megengine_optimize_options.py (signature counts, oprs in order with output shapes)
plus every opr's input shapes (weights padded, Subtensor cuts); and into
megengine_optimize/: each layout model's dumps with its input and float32 output
(<model>_io.npz), and the conv net's dumps for the options not saved before."""
import io
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_megengine_optimize_options as base  # noqa: E402  (aliases megtrace -> megengine)

import megengine  # noqa: E402
from megengine.jit import trace  # noqa: E402
from megengine.utils.network import Network  # noqa: E402

from layout_models import LAYOUT_MODELS  # noqa: E402

OPTIONS = ["none", "enable_fuse_conv_bias_nonlinearity", "enable_nchw88", "enable_nchw44",
           "enable_nchw44_dot", "enable_hwcd4", "enable_fuse_preprocess"]
CONVNET_EXTRA = ["enable_nchw44_dot", "enable_nchw4", "enable_nchw32", "enable_chwn4",
                 "enable_nchw64", "enable_hwcd4", "enable_fuse_preprocess",
                 "enable_io16xc32+enable_nchw88"]


def _summary(data: bytes) -> dict:
    out = base._summary(data)
    net = Network.load(io.BytesIO(data))
    out["inputs"] = [[type(o).__name__, [list(v.shape) for v in o.inputs]]
                     for o in net.all_oprs]
    return out


def _dump(infer, option):
    kwargs = {k: True for k in option.split("+")} if option != "none" else {}
    buf = io.BytesIO()
    infer.dump(buf, arg_names=["data"], **kwargs)
    return buf.getvalue()


def _traced(net, x):
    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)
    y = infer(megengine.tensor(x)).numpy()
    return infer, y


def main():
    np.random.seed(1)
    rng = np.random.default_rng(1)
    saved = os.path.join(HERE, "megengine_optimize")
    out = {}
    items = [(name, cls(), shape) for name, (cls, shape) in LAYOUT_MODELS.items()]
    items.append(("convnet", base.ConvNet(), (1, 3, 32, 32)))
    for name, net, shape in items:
        base._randomize_bn(net, rng)
        net.eval()
        x = rng.normal(size=shape).astype(np.float32)
        infer, y = _traced(net, x)
        prefix = name if name != "convnet" else "convnet2"
        np.savez(os.path.join(saved, f"{prefix}_io.npz"), data=x, out=y)
        out[name] = {}
        for option in (OPTIONS if name != "convnet" else CONVNET_EXTRA):
            try:
                data = _dump(infer, option)
            except Exception as e:  # noqa: BLE001 -- MegEngine's refusal is the golden data
                out[name][option] = {"error": f"{type(e).__name__}: {e}"[:400]}
                print(name, option, "error", str(e)[:200])
                continue
            out[name][option] = _summary(data)
            with open(os.path.join(saved, f"{prefix}_{option}.mge"), "wb") as f:
                f.write(data)
            print(name, option, len(out[name][option]["oprs"]), "oprs")
    with open(os.path.join(HERE, "megengine_layout_models.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"), sort_keys=True)


if __name__ == "__main__":
    main()
