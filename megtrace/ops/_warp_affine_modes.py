"""warp_affine's nearest, cubic and lanczos4 modes: megdnn's OpenCV-derived x86 kernel
(NHWC float32/uint8 images of 1 to 3 channels; MegEngine's other kernels are bilinear
only), in NumPy and Relax.

Source coordinates are fixed point: `round(m0 x 1024) + round((m1 y + m2) 1024)` plus a
rounding delta, kept to the whole pixel (nearest) or to 1/32 pixel. A 1/32-pixel fraction
pair picks a row of a K x K weight table (K = 4 cubic, 8 lanczos4) over the taps at
`floor(x) - K/2 + 1 ...`; float32 images use the float table, uint8 images its 15-bit
integer form (rounded, then corrected so each row sums to exactly 32768) and round the
integer sum as `(sum + 2^14) >> 15`, saturated. Out-of-range taps follow the border mode;
CONSTANT taps take the border value (truncated to uint8 for uint8 images).
"""
from __future__ import annotations

import functools

import numpy as np

from ._sampling import border_index_np, border_index_relax

IMODES = ("NEAREST", "LINEAR", "CUBIC", "LANCZOS4")
KSIZE = {"NEAREST": 1, "CUBIC": 4, "LANCZOS4": 8}
_TAB = 32                       # INTER_TAB_SIZE: 1/32-pixel fractions
_AB_SCALE = 1024                # 10-bit fixed-point coordinates
_COEF_SCALE = 1 << 15           # INTER_REMAP_COEF_SCALE of the uint8 tables
_SHORT = (-32768, 32767)


def supported(channels: int, dtype) -> bool:
    """Whether MegEngine's CPU computes the non-linear modes for this NHWC image."""
    return channels in (1, 2, 3) and str(dtype) in ("float32", "uint8")


# -- weight tables ------------------------------------------------------------------------
def _cubic_1d(x: np.float32) -> list:
    f = np.float32
    a, one = f(-0.75), f(1)
    c0 = ((a * (x + one) - f(5) * a) * (x + one) + f(8) * a) * (x + one) - f(4) * a
    c1 = ((a + f(2)) * x - (a + f(3))) * x * x + one
    c2 = ((a + f(2)) * (one - x) - (a + f(3))) * (one - x) * (one - x) + one
    return [c0, c1, c2, one - c0 - c1 - c2]


def _lanczos4_1d(x: np.float32) -> list:
    if x < np.finfo(np.float32).eps:
        return [np.float32(v) for v in (0, 0, 0, 1, 0, 0, 0, 0)]
    s45 = 0.70710678118654752440084436210485
    cs = [(1, 0), (-s45, -s45), (0, 1), (s45, -s45), (-1, 0), (s45, s45), (0, -1),
          (-s45, s45)]
    pi_4 = 0.78539816339744830962
    y0 = -float(x + np.float32(3)) * pi_4
    s0, c0 = np.sin(y0), np.cos(y0)
    coeffs, total = [], np.float32(0)
    for i, (a, b) in enumerate(cs):
        y = -float(x + np.float32(3) - np.float32(i)) * pi_4
        coeffs.append(np.float32((a * s0 + b * c0) / (y * y)))
        total = np.float32(total + coeffs[-1])
    total = np.float32(1) / total
    return [np.float32(c * total) for c in coeffs]


@functools.lru_cache(maxsize=None)
def tables(imode: str) -> tuple[np.ndarray, np.ndarray]:
    """(float32, int32) weight tables of shape (32 * 32, K * K), row `fy * 32 + fx`."""
    k = KSIZE[imode]
    one_d = _cubic_1d if imode == "CUBIC" else _lanczos4_1d
    taps = np.array([one_d(np.float32(i) * np.float32(1.0 / _TAB)) for i in range(_TAB)],
                    np.float32)                                     # (32, K)
    ftab = (taps[:, None, :, None] * taps[None, :, None, :])        # (fy, fx, ky, kx)
    itab = np.clip(np.rint(ftab * np.float32(_COEF_SCALE)), *_SHORT).astype(np.int32)
    half = k // 2
    for fy in range(_TAB):
        for fx in range(_TAB):
            t = itab[fy, fx]
            diff = int(t.sum()) - _COEF_SCALE
            if diff == 0:
                continue
            lo = hi = (half, half)          # the central 2 x 2 taps' smallest / largest
            for a in (half, half + 1):
                for b in (half, half + 1):
                    if t[a, b] < t[lo]:
                        lo = (a, b)
                    elif t[a, b] > t[hi]:
                        hi = (a, b)
            t[hi if diff < 0 else lo] -= diff
    return ftab.reshape(_TAB * _TAB, k * k), itab.reshape(_TAB * _TAB, k * k)


# -- NumPy --------------------------------------------------------------------------------
def _fixed(mat: np.ndarray, out, delta: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-point source columns and rows (M, OH, OW), int64, `>> shift` applied."""
    m = mat.astype(np.float64).reshape(-1, 6, 1, 1)
    cols = np.arange(out[1], dtype=np.float64).reshape(1, 1, -1)
    rows = np.arange(out[0], dtype=np.float64).reshape(1, -1, 1)

    def axis(a, b, c):
        fixed = np.rint(a * cols * _AB_SCALE) + np.rint((b * rows + c) * _AB_SCALE) + delta
        return fixed.astype(np.int64) >> shift
    return axis(m[:, 0], m[:, 1], m[:, 2]), axis(m[:, 3], m[:, 4], m[:, 5])


def _taps(imode: str, mat, out):
    """Top-left tap (int64 columns, rows) and table rows (M, OH, OW)."""
    if imode == "NEAREST":
        xs, ys = _fixed(mat, out, _AB_SCALE // 2, 10)
        return np.clip(xs, *_SHORT), np.clip(ys, *_SHORT), None
    xs, ys = _fixed(mat, out, _AB_SCALE // _TAB // 2, 5)
    alpha = (ys & (_TAB - 1)) * _TAB + (xs & (_TAB - 1))
    first = KSIZE[imode] // 2 - 1
    return np.clip(xs >> 5, *_SHORT) - first, np.clip(ys >> 5, *_SHORT) - first, alpha


def warp_np(x: np.ndarray, mat: np.ndarray, out, *, imode: str, border: str,
            border_val: float) -> np.ndarray:
    """x (N, H, W, C) float32/uint8, mat (N, 2, 3) -> (N, OH, OW, C) of x's dtype."""
    n, h, w, _ = x.shape
    k = KSIZE[imode]
    x0, y0, alpha = _taps(imode, mat, out)
    offsets = np.arange(k)
    ry, vy = border_index_np(y0[..., None] + offsets, h, border)     # (M, OH, OW, K)
    rx, vx = border_index_np(x0[..., None] + offsets, w, border)
    b = np.arange(n).reshape(-1, 1, 1, 1, 1)
    vals = x[b, ry[..., :, None], rx[..., None, :]]                  # (M, OH, OW, K, K, C)
    if vy is not None:
        valid = (vy[..., :, None] & vx[..., None, :])[..., None]
        vals = np.where(valid, vals, np.asarray(border_val).astype(x.dtype))
    if imode == "NEAREST":
        return vals[:, :, :, 0, 0]
    ftab, itab = tables(imode)
    if x.dtype == np.uint8:
        wts = itab[alpha].reshape(alpha.shape + (k, k, 1))
        total = (vals.astype(np.int64) * wts).sum(axis=(3, 4))
        return np.clip((total + _COEF_SCALE // 2) >> 15, 0, 255).astype(np.uint8)
    wts = ftab[alpha].reshape(alpha.shape + (k, k, 1)).astype(np.float64)
    return (vals.astype(np.float64) * wts).sum(axis=(3, 4)).astype(np.float32)


# -- Relax --------------------------------------------------------------------------------
def _taps_relax(L, mat, n: int, out, imode: str):
    """Relax counterpart of `_taps`: int32 (M, OH, OW) columns, rows, table rows."""
    R = L.R
    f64 = lambda v: L.const(float(v), "float64")        # noqa: E731
    m = R.astype(R.reshape(mat, (n, 6, 1, 1)), "float64")
    cols = L.const(np.arange(out[1], dtype=np.float64).reshape(1, 1, -1), "float64")
    rows = L.const(np.arange(out[0], dtype=np.float64).reshape(1, -1, 1), "float64")
    nearest = imode == "NEAREST"
    delta, unit = (_AB_SCALE // 2, _AB_SCALE) if nearest else (_AB_SCALE // _TAB // 2, _TAB)

    def coef(i):
        return R.reshape(R.strided_slice(m, axes=[1], begin=[i], end=[i + 1]), (n, 1, 1))

    def axis(i):
        along = R.round(R.multiply(R.multiply(coef(i), cols), f64(_AB_SCALE)))
        across = R.round(R.multiply(R.add(R.multiply(coef(i + 1), rows), coef(i + 2)),
                                    f64(_AB_SCALE)))
        return R.floor(R.divide(R.add(R.add(along, across), f64(delta)), f64(unit)))

    def whole(v):
        return R.astype(R.clip(v, *_SHORT), "int32")

    xs, ys = axis(0), axis(3)
    if nearest:
        return whole(xs), whole(ys), None
    first = KSIZE[imode] // 2 - 1
    xi, yi = R.floor(R.divide(xs, f64(_TAB))), R.floor(R.divide(ys, f64(_TAB)))
    fx, fy = R.subtract(xs, R.multiply(xi, f64(_TAB))), R.subtract(ys, R.multiply(yi, f64(_TAB)))
    alpha = R.astype(R.add(R.multiply(fy, f64(_TAB)), fx), "int32")
    shift = L.const(first, "int32")
    return R.subtract(whole(xi), shift), R.subtract(whole(yi), shift), alpha


def warp_relax(L, x, mat, x_type, out, *, imode: str, border: str, border_val: float):
    """Relax counterpart of `warp_np` (x an NHWC expression of type `x_type`)."""
    R = L.R
    n, h, w, c = x_type.shape
    k = KSIZE[imode]
    x0, y0, alpha = _taps_relax(L, mat, n, out, imode)
    offsets = L.const(np.arange(k, dtype=np.int32), "int32")
    ry, vy = border_index_relax(L, R.add(R.expand_dims(y0, -1), offsets), h, border)
    rx, vx = border_index_relax(L, R.add(R.expand_dims(x0, -1), offsets), w, border)
    base = L.const((np.arange(n, dtype=np.int32) * h * w).reshape(-1, 1, 1, 1, 1), "int32")
    flat = R.add(base, R.add(R.multiply(R.expand_dims(ry, -1), L.const(w, "int32")),
                             R.expand_dims(rx, -2)))                   # (M, OH, OW, K, K)
    vals = R.take(R.reshape(x, (n * h * w, c)), flat, axis=0)          # (M, OH, OW, K, K, C)
    if vy is not None:
        valid = R.expand_dims(R.logical_and(R.expand_dims(vy, -1), R.expand_dims(vx, -2)), -1)
        fill = np.asarray(border_val).astype(x_type.dtype)
        vals = R.where(valid, vals, L.const(fill, x_type.dtype))
    if imode == "NEAREST":
        return R.reshape(vals, (n,) + tuple(out) + (c,))
    ftab, itab = tables(imode)
    shape = (n,) + tuple(out) + (k, k, 1)
    if x_type.dtype == "uint8":
        wts = R.reshape(R.take(L.const(itab, "int32"), alpha, axis=0), shape)
        total = R.sum(R.multiply(R.astype(vals, "int32"), wts), axis=[3, 4])
        rounded = R.floor_divide(R.add(total, L.const(_COEF_SCALE // 2, "int32")),
                                 L.const(_COEF_SCALE, "int32"))
        return R.astype(R.clip(rounded, 0, 255), "uint8")
    wts = R.reshape(R.take(L.const(ftab, "float32"), alpha, axis=0), shape)
    return R.sum(R.multiply(vals, wts), axis=[3, 4])
