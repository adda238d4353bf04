"""megdnn's uint8 CPU color conversions (x86 cvt_color): the YUV420 modes, RGBA2GRAY and
uint8 RGB2YUV/YUV2RGB, in integer arithmetic, written once over an arithmetic backend
(`NumpyInts` for eager, `RelaxInts` for the lowering) so both compute the same bits.

YUV420 images are (N, 3H/2, W, 1): H rows of Y, then chroma at half resolution, either
interleaved (NV12: U V pairs, NV21: V U pairs; H/2 rows of W) or planar (YU12: a U plane
then a V plane, YV12: V then U; each H/2 x W/2). megdnn's formulas:
  YUV2RGB/BGR_*:        R = Y + (359 (V-128) >> 8), G = Y - ((88 (U-128) + 183 (V-128)) >> 8),
                        B = Y + (454 (U-128) >> 8)
  BT601_YUV2RGB/BGR_*:  y = Y * 257 * 18997 >> 16, B = (128 U + y + 128 * -128 - 1160) >> 6,
                        G = (-(25 U + 52 V) + y + (25 + 52) 128 - 1160) >> 6,
                        R = (102 V + y - 102 * 128 - 1160) >> 6
  RGB2YUV (uint8):      Y = (1868 c0 + 9617 c1 + 4899 c2 + 2^13) >> 14, U = descale(8061 (c0 - Y)
                        + 128 * 2^14), V = descale(14369 (c2 - Y) + 128 * 2^14)
  YUV2RGB (uint8):      R = Y + descale(33292 (U-128)), G = Y + descale(-6472 (U-128) - 9519
                        (V-128)), B = Y + descale(18678 (V-128)), descale(v) = (v + 2^13) >> 14
every result saturated to [0, 255]; shifts floor (arithmetic) as in C on int32.
"""
from __future__ import annotations

import numpy as np

YUV420_LAYOUTS = ("NV21", "NV12", "YV12", "YU12")
YUV420_MODES = tuple(f"{kind}_{layout}" for kind in ("YUV2GRAY", "YUV2RGB", "YUV2BGR",
                                                    "BT601_YUV2RGB", "BT601_YUV2BGR")
                     for layout in YUV420_LAYOUTS)
UINT8_MODES = ("RGBA2GRAY", "RGB2YUV", "YUV2RGB")     # uint8 kernels of these modes
_GRAY = (4899, 9617, 1868)                            # R, G, B in units of 2**-14


class NumpyInts:
    """The arithmetic on int32 NumPy arrays."""

    def __init__(self, x: np.ndarray):
        self.x = x

    def k(self, v):
        return np.int32(v)

    add, sub, mul = staticmethod(np.add), staticmethod(np.subtract), staticmethod(np.multiply)

    @staticmethod
    def shr(a, n: int):
        return a >> n

    @staticmethod
    def u8(a):
        return np.clip(a, 0, 255).astype(np.uint8)

    @staticmethod
    def cat(parts):
        return np.concatenate(parts, axis=-1)

    def ch(self, i: int):
        return self.x[..., i:i + 1].astype(np.int32)

    def planes(self, layout: str):
        n, ih, w, _ = self.x.shape
        h = ih // 3 * 2
        flat = self.x.reshape(n, ih * w).astype(np.int32)
        y = flat[:, :h * w].reshape(n, h, w)
        if layout in ("NV12", "NV21"):
            uv = flat[:, h * w:].reshape(n, h // 2, w // 2, 2)
            first, second = uv[..., 0], uv[..., 1]
        else:
            q = (h // 2) * (w // 2)
            first = flat[:, h * w:h * w + q].reshape(n, h // 2, w // 2)
            second = flat[:, h * w + (h // 4) * w:h * w + (h // 4) * w + q].reshape(
                n, h // 2, w // 2)
        up = lambda p: np.repeat(np.repeat(p, 2, axis=1), 2, axis=2)[..., None]  # noqa: E731
        u, v = (first, second) if layout in ("NV12", "YU12") else (second, first)
        return y[..., None], up(u), up(v)


class RelaxInts:
    """The same arithmetic on Relax expressions (int32)."""

    def __init__(self, L, x, x_type):
        self.L, self.R, self.x, self.shape = L, L.R, x, tuple(x_type.shape)

    def k(self, v):
        return self.L.const(int(v), "int32")

    def add(self, a, b):
        return self.R.add(a, b)

    def sub(self, a, b):
        return self.R.subtract(a, b)

    def mul(self, a, b):
        return self.R.multiply(a, b)

    def shr(self, a, n: int):
        return self.R.floor_divide(a, self.k(1 << n))

    def u8(self, a):
        return self.R.astype(self.R.clip(a, 0, 255), "uint8")

    def cat(self, parts):
        return self.R.concat(parts, axis=3)

    def ch(self, i: int):
        return self.R.astype(self.R.strided_slice(self.x, axes=[3], begin=[i], end=[i + 1]),
                             "int32")

    def planes(self, layout: str):
        R = self.R
        n, ih, w, _ = self.shape
        h = ih // 3 * 2
        flat = R.astype(R.reshape(self.x, (n, ih * w)), "int32")

        def part(begin, size, shape):
            return R.reshape(R.strided_slice(flat, axes=[1], begin=[begin],
                                             end=[begin + size]), shape)
        y = part(0, h * w, (n, h, w, 1))
        if layout in ("NV12", "NV21"):
            uv = part(h * w, (h // 2) * w, (n, h // 2, w // 2, 2))
            first, second = (R.strided_slice(uv, axes=[3], begin=[i], end=[i + 1])
                             for i in (0, 1))
        else:
            q = (h // 2) * (w // 2)
            first = part(h * w, q, (n, h // 2, w // 2, 1))
            second = part(h * w + (h // 4) * w, q, (n, h // 2, w // 2, 1))

        def up(p):
            return R.repeat(R.repeat(p, 2, axis=1), 2, axis=2)
        u, v = (first, second) if layout in ("NV12", "YU12") else (second, first)
        return y, up(u), up(v)


def convert(ops, mode: str):
    """The uint8 result of `mode` on the backend's image."""
    if mode in YUV420_MODES:
        return _yuv420(ops, mode)
    if mode == "RGBA2GRAY":
        acc = ops.add(ops.add(ops.mul(ops.ch(0), ops.k(_GRAY[0])),
                              ops.mul(ops.ch(1), ops.k(_GRAY[1]))),
                      ops.add(ops.mul(ops.ch(2), ops.k(_GRAY[2])), ops.k(1 << 13)))
        return ops.u8(ops.shr(acc, 14))
    c0, c1, c2 = ops.ch(0), ops.ch(1), ops.ch(2)
    descale = lambda v: ops.shr(ops.add(v, ops.k(1 << 13)), 14)     # noqa: E731
    if mode == "RGB2YUV":
        y = descale(ops.add(ops.add(ops.mul(c0, ops.k(1868)), ops.mul(c1, ops.k(9617))),
                            ops.mul(c2, ops.k(4899))))
        u = descale(ops.add(ops.mul(ops.sub(c0, y), ops.k(8061)), ops.k(128 << 14)))
        v = descale(ops.add(ops.mul(ops.sub(c2, y), ops.k(14369)), ops.k(128 << 14)))
        return ops.cat([ops.u8(y), ops.u8(u), ops.u8(v)])
    u, v = ops.sub(c1, ops.k(128)), ops.sub(c2, ops.k(128))             # uint8 YUV2RGB
    r = ops.add(c0, descale(ops.mul(u, ops.k(33292))))
    g = ops.add(c0, descale(ops.add(ops.mul(v, ops.k(-9519)), ops.mul(u, ops.k(-6472)))))
    b = ops.add(c0, descale(ops.mul(v, ops.k(18678))))
    return ops.cat([ops.u8(r), ops.u8(g), ops.u8(b)])


def _yuv420(ops, mode: str):
    y, u, v = ops.planes(mode[-4:])
    if mode.startswith("YUV2GRAY"):
        return ops.u8(y)
    if mode.startswith("BT601"):
        sy = ops.shr(ops.mul(y, ops.k(257 * 18997)), 16)
        ygb = -1160
        b = ops.shr(ops.add(ops.add(ops.mul(u, ops.k(128)), sy), ops.k(-128 * 128 + ygb)), 6)
        g = ops.shr(ops.add(ops.sub(sy, ops.add(ops.mul(u, ops.k(25)), ops.mul(v, ops.k(52)))),
                            ops.k((25 + 52) * 128 + ygb)), 6)
        r = ops.shr(ops.add(ops.add(ops.mul(v, ops.k(102)), sy), ops.k(-102 * 128 + ygb)), 6)
    else:
        du, dv = ops.sub(u, ops.k(128)), ops.sub(v, ops.k(128))
        r = ops.add(y, ops.shr(ops.mul(dv, ops.k(359)), 8))
        g = ops.sub(y, ops.shr(ops.add(ops.mul(du, ops.k(88)), ops.mul(dv, ops.k(183))), 8))
        b = ops.add(y, ops.shr(ops.mul(du, ops.k(454)), 8))
    rgb = [ops.u8(r), ops.u8(g), ops.u8(b)]
    return ops.cat(rgb if "2RGB" in mode else rgb[::-1])
