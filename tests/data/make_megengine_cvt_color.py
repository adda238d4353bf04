"""Real MegEngine 1.13's F.vision.cvt_color on CPU for the modes beyond the float ones:
the YUV420 modes (NV21/NV12 semi-planar, YV12/YU12 planar: GRAY, RGB/BGR and the
BT601_ variants), RGBA2GRAY, and uint8 RGB2YUV/YUV2RGB (megdnn's x86 integer kernels).
Run in the megref chroot from the checkout,
`../shared/megref/mpy tests/data/make_megengine_cvt_color.py`.

Writes megengine_cvt_color.npz: the uint8 inputs `x/yuv420` (2, 12, 22, 1) (an 8 x 22
image; 22 columns take both the 16-wide SIMD loop and the scalar tail), `x/rgba`
(2, 5, 7, 4), `x/rgb` (2, 5, 7, 3), and MegEngine's output `y/<mode>` for each mode.
Output (MegEngine 1.13, x86 CPU): `23 modes`.

megdnn has uint8 kernels only for these modes: with float32 input MegEngine raises
RuntimeError "There is not a cvt_opr "cvt_rgba2gray" to deal with "float"" (RGBA2GRAY) or
throws in its worker thread and aborts the process (the YUV420 modes: "Unsupport dtype
for real yuv" for BT601_*), so this script does not try them.
"""
import os

import numpy as np

import megengine as mge
import megengine.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261208)

X = {"yuv420": rng.integers(0, 256, (2, 12, 22, 1)).astype(np.uint8),
     "rgba": rng.integers(0, 256, (2, 5, 7, 4)).astype(np.uint8),
     "rgb": rng.integers(0, 256, (2, 5, 7, 3)).astype(np.uint8)}
YUV420 = [f"{kind}_{layout}" for kind in ("YUV2GRAY", "YUV2RGB", "YUV2BGR", "BT601_YUV2RGB",
                                          "BT601_YUV2BGR")
          for layout in ("NV21", "NV12", "YV12", "YU12")]
MODES = {**{m: "yuv420" for m in YUV420}, "RGBA2GRAY": "rgba", "RGB2YUV": "rgb",
         "YUV2RGB": "rgb"}


def main():
    data = {f"x/{k}": v for k, v in X.items()}
    for mode, src in MODES.items():
        data[f"y/{mode}"] = F.vision.cvt_color(mge.tensor(X[src]), mode).numpy()
    np.savez_compressed(os.path.join(HERE, "megengine_cvt_color.npz"), **data)
    print(len(MODES), "modes")


if __name__ == "__main__":
    main()
