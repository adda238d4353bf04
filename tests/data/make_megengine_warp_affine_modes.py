"""Real MegEngine 1.13's F.vision.warp_affine with interp_mode "nearest", "cubic" and
"lanczos4" (format NHWC, float32/uint8 images of 1 or 3 channels: megdnn's OpenCV-derived
x86 kernel), as golden data: run in the megref chroot from the checkout,
`../shared/megref/mpy tests/data/make_megengine_warp_affine_modes.py`.

Writes megengine_warp_affine_modes.npz: the NHWC source images `x/<dtype>_c<channels>`,
the (2, 2, 3) matrices `mat`, the output size `out`, the border values `bval/<dtype>` and,
for each case `<dtype>_c<channels>_<imode>_<border>`, MegEngine's output `y/<case>`.
The matrices: a rotation with scale whose output reaches past every edge of the source,
and a shear/translate one. Prints what MegEngine does with the combinations its CPU
kernel refuses (pasted below).

Output (MegEngine 1.13, x86 CPU):
    CASES
    refused NCHW nearest: AsyncError
    refused NHWC c4 cubic: AsyncError
    refused NHWC float16 lanczos4: AsyncError
    refused NHWC area: AsyncError
"""
import os

import numpy as np

import megengine as mge
import megengine.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261208)

MATS = np.array([
    [[0.85, -0.45, 2.3], [0.4, 0.9, -1.7]],
    [[1.15, 0.2, -0.8], [-0.1, 0.7, 2.45]],
], np.float32)
OUT = (6, 10)
BVAL = {"uint8": 7.6, "float32": -2.5}       # uint8: the kernel truncates it to 7
IMAGES = {f"{dtype}_c{c}": (rng.integers(0, 256, (2, 9, 11, c)).astype(np.uint8)
                            if dtype == "uint8" else
                            (rng.standard_normal((2, 9, 11, c)) * 10).astype(np.float32))
          for dtype in ("uint8", "float32") for c in (1, 3)}


def refused(what, fn):
    try:
        fn().numpy()
        print("computed", what)
    except Exception as e:                       # noqa: BLE001  (the type is the fact)
        cause = [ln for ln in str(e).splitlines() if "assert" in ln or "unsupport" in ln]
        print(f"refused {what}: {type(e).__name__} {cause[:1]}")


def main():
    data = {"mat": MATS, "out": np.array(OUT, np.int32)}
    data.update({f"x/{k}": v for k, v in IMAGES.items()})
    data.update({f"bval/{k}": np.float32(v) for k, v in BVAL.items()})
    for dtype in ("uint8", "float32"):
        for imode in ("nearest", "cubic", "lanczos4"):
            for border in ("constant", "replicate", "reflect", "reflect_101", "wrap"):
                for channels in ((1, 3) if border in ("constant", "reflect_101") else (3,)):
                    name = f"{dtype}_c{channels}_{imode}_{border}"
                    y = F.vision.warp_affine(
                        mge.tensor(IMAGES[f"{dtype}_c{channels}"]), mge.tensor(MATS), OUT,
                        border_mode=border, border_val=BVAL[dtype], interp_mode=imode)
                    data[f"y/{name}"] = y.numpy()
    np.savez_compressed(os.path.join(HERE, "megengine_warp_affine_modes.npz"), **data)
    print(sum(k.startswith("y/") for k in data), "cases")
    x = np.ones((2, 9, 11, 3), np.float32)
    refused("NCHW nearest", lambda: F.vision.warp_affine(
        mge.tensor(x.transpose(0, 3, 1, 2)), mge.tensor(MATS), OUT, format="NCHW",
        interp_mode="nearest"))
    refused("NHWC c4 cubic", lambda: F.vision.warp_affine(
        mge.tensor(np.ones((2, 9, 11, 4), np.float32)), mge.tensor(MATS), OUT,
        interp_mode="cubic"))
    refused("NHWC float16 lanczos4", lambda: F.vision.warp_affine(
        mge.tensor(x.astype(np.float16)), mge.tensor(MATS), OUT, interp_mode="lanczos4"))
    refused("NHWC area", lambda: F.vision.warp_affine(
        mge.tensor(x), mge.tensor(MATS), OUT, interp_mode="area"))


if __name__ == "__main__":
    main()
