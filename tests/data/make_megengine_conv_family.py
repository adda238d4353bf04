"""Golden outputs of MegEngine 1.13's convolution family (run in the megref chroot:
/work/shared/megref/mpy tests/data/make_megengine_conv_family.py). Writes
megengine_conv_family.npz: for each case <name>_in<i> inputs and <name>_out."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F

rng = np.random.RandomState(7)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype("float32")


CASES = {
    "conv1d": ((r(2, 4, 9), r(3, 4, 3)),
               lambda x, w: F.conv1d(x, w, None, 2, 1, 2)),
    "conv3d": ((r(2, 4, 5, 6, 7), r(3, 4, 3, 2, 3)),
               lambda x, w: F.conv3d(x, w, None, (2, 1, 2), (1, 0, 1), (1, 2, 1))),
    "conv3d_group": ((r(1, 4, 5, 5, 5), r(2, 3, 2, 3, 3, 3)),
                     lambda x, w: F.conv3d(x, w, None, 1, 1, 1, groups=2)),
    "conv_transpose2d": ((r(2, 4, 5, 6), r(4, 3, 3, 2)),
                         lambda x, w: F.conv_transpose2d(x, w, None, (2, 3), (1, 0),
                                                         (1, 2), (1, 1))),
    "conv_transpose2d_dil": ((r(1, 2, 4, 4), r(2, 3, 3, 3)),
                             lambda x, w: F.conv_transpose2d(x, w, None, 2, 1, 0, 2)),
    "conv_transpose2d_group": ((r(2, 4, 5, 6), r(2, 2, 3, 3, 3)),
                               lambda x, w: F.conv_transpose2d(x, w, None, 2, 1,
                                                               groups=2)),
    "conv_transpose3d": ((r(1, 3, 3, 4, 5), r(3, 2, 2, 3, 2)),
                         lambda x, w: F.conv_transpose3d(x, w, None, (2, 1, 2), (0, 1, 0),
                                                         (1, 0, 1), (1, 1, 1))),
    "local_conv2d": ((r(2, 4, 6, 7), r(2, 6, 7, 2, 3, 3, 3)),
                     lambda x, w: F.local_conv2d(x, w, None, 1, 1)),
    "local_conv2d_stride": ((r(1, 2, 7, 8), r(1, 3, 4, 2, 3, 2, 4)),
                            lambda x, w: F.local_conv2d(x, w, None, 2, 0, 1)),
    "deformable_conv2d": ((r(2, 4, 6, 7), r(6, 4, 3, 3), 2 * r(2, 18, 6, 7),
                           np.abs(r(2, 9, 6, 7))),
                          lambda x, w, o, m: F.deformable_conv2d(x, w, o, m, None, 1, 1)),
    "deformable_conv2d_groups": ((r(1, 4, 7, 7), r(2, 3, 2, 3, 3), 3 * r(1, 36, 3, 3),
                                  r(1, 18, 3, 3)),
                                 lambda x, w, o, m: F.deformable_conv2d(
                                     x, w, o, m, None, 2, 0, 1, groups=2)),
}

out = {}
for name, (inputs, fn) in CASES.items():
    for i, a in enumerate(inputs):
        out[f"{name}_in{i}"] = a
    out[f"{name}_out"] = fn(*[mge.tensor(a) for a in inputs]).numpy()
np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "megengine_conv_family.npz"), **out)
print("wrote", len(CASES), "cases")
