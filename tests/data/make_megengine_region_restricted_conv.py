"""Golden F.nn.region_restricted_conv data from real MegEngine 1.13: outputs and gradients
of a few configurations (eager, CPU), and MegEngine's own dump of one of them.

Run with the megref chroot from the project root:
    /work/shared/megref/mpy tests/data/make_megengine_region_restricted_conv.py
"""
from pathlib import Path

import numpy as np

import megengine as mge
import megengine.functional as F
from megengine.autodiff import GradManager
from megengine.jit import trace

HERE = Path(__file__).parent
# (tag, x shape, groups, oc/groups, (kh, kw), padding, dilation, region dtype, region ids)
CASES = [
    ("pad", (2, 4, 5, 6), 2, 3, (2, 3), (1, 0), (1, 1), "int32", 3),
    ("dilate", (1, 3, 7, 7), 3, 2, (3, 3), (2, 2), (2, 1), "int32", 2),
    ("uint8", (2, 2, 4, 5), 1, 4, (3, 2), (1, 1), (1, 1), "uint8", 4),
    ("depthwise", (1, 6, 6, 6), 6, 1, (3, 3), (1, 1), (1, 1), "int32", 5),
]


def main():
    rng = np.random.default_rng(7)
    out = {}
    for tag, xs, g, ocg, k, pad, dil, rdt, ids in CASES:
        n, c, h, w = xs
        x = rng.standard_normal(xs).astype(np.float32)
        wt = rng.standard_normal((g, ocg, c // g) + k).astype(np.float32)
        oh = h + 2 * pad[0] - dil[0] * (k[0] - 1)
        ow = w + 2 * pad[1] - dil[1] * (k[1] - 1)
        rin = rng.integers(0, ids, (n, h, w)).astype(rdt)
        rout = rng.integers(0, ids, (n, oh, ow)).astype(rdt)
        dy = rng.standard_normal((n, g * ocg, oh, ow)).astype(np.float32)
        xt, wtt = mge.tensor(x), mge.tensor(wt)
        gm = GradManager().attach([xt, wtt])
        with gm:
            y = F.region_restricted_conv(xt, wtt, mge.tensor(rin), mge.tensor(rout),
                                         padding=pad, dilation=dil, groups=g)
            gm.backward(y, mge.tensor(dy))
        for name, v in (("x", x), ("w", wt), ("rin", rin), ("rout", rout), ("dy", dy),
                        ("y", y.numpy()), ("gx", xt.grad.numpy()), ("gw", wtt.grad.numpy())):
            out[f"{tag}/{name}"] = v
        out[f"{tag}/geometry"] = np.array([g, pad[0], pad[1], dil[0], dil[1]], np.int32)
    np.savez(HERE / "megengine_region_restricted_conv.npz", **out)

    # MegEngine's own dump of the "pad" case, its weight a constant
    w = out["pad/w"]

    @trace(symbolic=True, capture_as_const=True)
    def rrconv(x, rin, rout):
        return F.region_restricted_conv(x, mge.tensor(w), rin, rout, padding=(1, 0), groups=2)

    rrconv(mge.tensor(out["pad/x"]), mge.tensor(out["pad/rin"]), mge.tensor(out["pad/rout"]))
    rrconv.dump(str(HERE / "megengine-1.13" / "region_restricted_conv.mge"),
                arg_names=["x", "rin", "rout"], output_names=["y"])


main()
