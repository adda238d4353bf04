"""Real MegEngine 1.13's F.vision.warp_perspective(format="NHWC") on CPU, as golden data:
run in the megref chroot from the checkout,
`../shared/megref/mpy tests/data/make_megengine_warp_nhwc.py`.

Writes megengine_warp_nhwc.npz: for each case `<dtype>_c<channels>_<border>` the NHWC
source images (`<case>/x`), matrices (`<case>/mat`), mat_idx (`<case>/idx`), output
size (`<case>/out`), border value (`<case>/bval`) and MegEngine's eager output
(`<case>/y`). uint8/float32 with 1 to 3 channels take megdnn's OpenCV-derived x86 kernel
(1/32-pixel coordinates); 4 channels the naive one. The matrices: a scale/translate
one, a mild random perspective one, a strongly perspective one whose denominator
crosses zero inside the output, one whose denominator is 5e-4 at column 6
(coordinates past the kernel's int16 range), and one on a wide output (several
of the kernel's column blocks)."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261202)

MATS = np.array([
    [[0.625, 0.0, 1.25], [0.0, 0.75, -0.5], [0.0, 0.0, 1.0]],
    [[0.9, 0.12, 0.7], [-0.08, 1.1, 0.3], [0.004, -0.006, 1.0]],
    [[1.3, -0.4, 2.0], [0.5, 0.8, -1.0], [0.09, -0.12, 0.35]],
    [[10.0, 0.0, 0.0], [0.0, 10.0, 3.0], [0.125, 0.0, -0.7495]],
], np.float32)


def case(dtype, channels, border, out, mats, bval):
    n_src = 2
    shape = (n_src, 9, 11, channels)
    if dtype == "uint8":
        x = rng.integers(0, 256, shape).astype(np.uint8)
    else:
        x = rng.standard_normal(shape).astype(np.float32) * 10
    idx = rng.integers(0, n_src, mats.shape[0]).astype(np.int32)
    y = F.vision.warp_perspective(mge.tensor(x), mge.tensor(mats), out,
                                  mat_idx=mge.tensor(idx), border_mode=border,
                                  border_val=bval, format="NHWC")
    return {"x": x, "mat": mats, "idx": idx, "out": np.array(out, np.int32),
            "bval": np.float32(bval), "y": y.numpy()}


def main():
    data = {}
    wide = np.array([[[0.13, 0.01, 0.3], [0.02, 0.4, 0.1], [0.0005, 0.001, 1.0]]], np.float32)
    for dtype in ("uint8", "float32"):
        for channels in (1, 3, 4):
            for border in ("CONSTANT", "REPLICATE", "REFLECT", "REFLECT_101", "WRAP"):
                name = f"{dtype}_c{channels}_{border}"
                bval = 7.0 if dtype == "uint8" else -2.5
                for key, value in case(dtype, channels, border, (7, 13), MATS, bval).items():
                    data[f"{name}/{key}"] = value
        for key, value in case(dtype, 3, "REPLICATE", (20, 70), wide, 0.0).items():
            data[f"{dtype}_c3_wide/{key}"] = value
    np.savez_compressed(os.path.join(HERE, "megengine_warp_nhwc.npz"), **data)
    print(len(data), "arrays")


if __name__ == "__main__":
    main()
