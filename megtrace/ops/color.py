"""cvt_color: MegEngine's CvtColor on NHWC images (channels last), with megdnn's CPU
coefficients (float: BT.601 luma and its YUV; uint8 gray: OpenCV's 14-bit fixed point;
the uint8-only modes, YUV420 among them, in `_color_int`)."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from . import _color_int as ints
from .registry import NOT_DIFFERENTIABLE, MgeOpr, OpDef, register

_LUMA = (0.299, 0.587, 0.114)          # R, G, B weights
_GRAY_FIXED = (4899, 9617, 1868)       # the same, in units of 2**-14

# mode -> (input channels, output channels, dtypes megtrace implements it for)
MODES = {
    "RGB2GRAY": (3, 1, ("float32", "uint8")), "BGR2GRAY": (3, 1, ("float32", "uint8")),
    "RGB2YUV": (3, 3, ("float32", "uint8")), "YUV2RGB": (3, 3, ("float32", "uint8")),
    "GRAY2RGB": (1, 3, ("float32", "uint8")), "RGB2BGR": (3, 3, ("uint8",)),
    "BGR2RGB": (3, 3, ("uint8",)), "RGBA2RGB": (4, 3, ("uint8",)),
    "RGBA2BGR": (4, 3, ("uint8",)), "RGBA2GRAY": (4, 1, ("uint8",)),
    # (N, 3H/2, W, 1) YUV420 images in, (N, H, W, 1 or 3) out
    **{m: (1, 1 if m.startswith("YUV2GRAY") else 3, ("uint8",)) for m in ints.YUV420_MODES},
}
# pure channel selections
_PICK = {"GRAY2RGB": (0, 0, 0), "RGB2BGR": (2, 1, 0), "BGR2RGB": (2, 1, 0),
         "RGBA2RGB": (0, 1, 2), "RGBA2BGR": (2, 1, 0)}


def _infer(x, *, mode):
    if mode not in MODES:
        raise ValueError(f"cvt_color: mode {mode!r} is not supported by megtrace; supported: "
                         f"{sorted(MODES)}")
    cin, cout, dtypes = MODES[mode]
    if x.ndim != 4 or x.shape[3] != cin:
        raise ShapeError(f"cvt_color: {mode} needs an NHWC image with {cin} channels; got {x}")
    if x.dtype not in dtypes:
        raise TypeError(f"cvt_color: {mode} on {x.dtype} is not supported; expected one of "
                        f"{dtypes}")
    if mode in ints.YUV420_MODES:
        rows = 6 if mode[-4:] in ("YV12", "YU12") else 3
        if x.shape[1] % rows or x.shape[2] % 2:
            raise ShapeError(f"cvt_color: {mode} needs a YUV420 image of 3H/2 rows, a "
                             f"multiple of {rows}, and an even width; got {x}")
        return TensorType((x.shape[0], x.shape[1] // 3 * 2, x.shape[2], cout), x.dtype)
    return TensorType(x.shape[:3] + (cout,), x.dtype)


def _integer_kernel(mode: str, dtype) -> bool:
    return mode in ints.YUV420_MODES or (mode in ints.UINT8_MODES and str(dtype) == "uint8")


def _gray_weights(mode: str, fixed: bool):
    w = _GRAY_FIXED if fixed else _LUMA
    return w if mode == "RGB2GRAY" else w[::-1]


def _eager(x, *, mode):
    if _integer_kernel(mode, x.dtype):
        return ints.convert(ints.NumpyInts(x), mode)
    if mode in _PICK:
        return x[..., list(_PICK[mode])]
    if mode in ("RGB2GRAY", "BGR2GRAY"):
        if x.dtype == np.uint8:
            w = _gray_weights(mode, True)
            acc = sum(x[..., i].astype(np.int64) * w[i] for i in range(3)) + (1 << 13)
            return (acc >> 14).astype(np.uint8)[..., None]
        w = _gray_weights(mode, False)
        return sum(x[..., i:i + 1] * np.float32(w[i]) for i in range(3)).astype(np.float32)
    c0, c1, c2 = (x[..., i:i + 1].astype(np.float32) for i in range(3))
    if mode == "RGB2YUV":
        y = c0 * np.float32(0.114) + c1 * np.float32(0.587) + c2 * np.float32(0.299)
        u = (c0 - y) * np.float32(0.492) + np.float32(0.5)
        v = (c2 - y) * np.float32(0.877) + np.float32(0.5)
        return np.concatenate([y, u, v], axis=-1)
    u, v = c1 - np.float32(0.5), c2 - np.float32(0.5)       # YUV2RGB
    return np.concatenate([c0 + np.float32(2.032) * u,
                           c0 - np.float32(0.395) * u - np.float32(0.581) * v,
                           c0 + np.float32(1.14) * v], axis=-1)


def _lower(L, x, *, mode):
    R = L.R
    if _integer_kernel(mode, L.types[0].dtype):
        return ints.convert(ints.RelaxInts(L, x, L.types[0]), mode)
    if mode in _PICK:
        return R.take(x, L.const(np.array(_PICK[mode], np.int32), "int32"), axis=3)

    def ch(i, dtype="float32"):
        c = R.strided_slice(x, axes=[3], begin=[i], end=[i + 1])
        return c if L.types[0].dtype == dtype else R.astype(c, dtype)

    def f(v):
        return L.const(v, "float32")

    if mode in ("RGB2GRAY", "BGR2GRAY"):
        if L.types[0].dtype == "uint8":
            w = _gray_weights(mode, True)
            acc = R.add(R.add(R.multiply(ch(0, "int32"), L.const(w[0], "int32")),
                              R.multiply(ch(1, "int32"), L.const(w[1], "int32"))),
                        R.add(R.multiply(ch(2, "int32"), L.const(w[2], "int32")),
                              L.const(1 << 13, "int32")))
            return R.astype(R.right_shift(acc, L.const(14, "int32")), "uint8")
        w = _gray_weights(mode, False)
        return R.add(R.add(R.multiply(ch(0), f(w[0])), R.multiply(ch(1), f(w[1]))),
                     R.multiply(ch(2), f(w[2])))
    if mode == "RGB2YUV":
        y = R.add(R.add(R.multiply(ch(0), f(0.114)), R.multiply(ch(1), f(0.587))),
                  R.multiply(ch(2), f(0.299)))
        u = R.add(R.multiply(R.subtract(ch(0), y), f(0.492)), f(0.5))
        v = R.add(R.multiply(R.subtract(ch(2), y), f(0.877)), f(0.5))
        return R.concat([y, u, v], axis=3)
    y, u, v = ch(0), R.subtract(ch(1), f(0.5)), R.subtract(ch(2), f(0.5))
    return R.concat([R.add(y, R.multiply(f(2.032), u)),
                     R.subtract(R.subtract(y, R.multiply(f(0.395), u)), R.multiply(f(0.581), v)),
                     R.add(y, R.multiply(f(1.14), v))], axis=3)


# MegEngine's CvtColor declares no gradient rule: none flows through it here either.
register(OpDef("cvt_color", params={"mode": "RGB2GRAY"}, eager=_eager, infer=_infer,
               lower=_lower,
               mge=MgeOpr("CvtColor", "CvtColor", fields=lambda p: {"mode": p["mode"]},
                          decode=lambda f: {"mode": f["mode"]}),
               opaque_in_optimize=True, vjp=NOT_DIFFERENTIABLE))
