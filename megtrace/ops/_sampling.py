"""Bilinear/nearest sampling of NCHW images at given source coordinates, shared by
warp_perspective, warp_affine and remap (MegEngine's megdnn kernels: taps at floor(x)
and floor(x) + 1, out-of-range taps mapped by OpenCV's border rules, CONSTANT taps
replaced by the border value, integer outputs rounded half away from zero).

`sample_np` is the NumPy reference; `sample_relax` builds the same computation from
Relax ops (a gather on the image flattened to rows of channels).
"""
from __future__ import annotations

import numpy as np

# MegEngine's WarpPerspective/Remap BorderMode enum, in its order.
BORDER_MODES = ("REPLICATE", "REFLECT", "REFLECT_101", "WRAP", "CONSTANT")


def border_mode(name: str, value: str) -> str:
    mode = str(value).upper()
    if mode not in BORDER_MODES:
        raise ValueError(f"{name}: border_mode must be one of "
                         f"{[m.lower() for m in BORDER_MODES]}; got {value!r}")
    return mode


def border_index_np(p: np.ndarray, n: int, mode: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(index within [0, n), validity mask for CONSTANT (else None))."""
    if mode == "CONSTANT":
        valid = (p >= 0) & (p < n)
        return np.clip(p, 0, n - 1), valid
    if mode == "REPLICATE" or n == 1:
        return np.clip(p, 0, n - 1), None
    if mode == "WRAP":
        return np.mod(p, n), None
    edge = 1 if mode == "REFLECT_101" else 0      # REFLECT repeats the edge pixel
    period = 2 * n - 2 * edge
    m = np.mod(p, period)
    return np.where(m >= n, period - m - (1 - edge), m), None


def round_to(values: np.ndarray, dtype) -> np.ndarray:
    """megdnn's RoundingConverter: float results as is, integers rounded half away from
    zero and saturated."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    rounded = np.sign(values) * np.floor(np.abs(values) + 0.5)
    return np.clip(rounded, info.min, info.max).astype(dtype)


def sample_np(src: np.ndarray, batch: np.ndarray, xs: np.ndarray, ys: np.ndarray, *,
              border: str, border_val: float, nearest: bool = False) -> np.ndarray:
    """src (N, C, H, W); batch (M,) source image per output; xs, ys (M, OH, OW) float32
    source columns/rows. Returns (M, C, OH, OW) float32 (before rounding); float64 inputs
    are sampled in float64 (gradient checks by finite differences)."""
    h, w = src.shape[2:]
    work = np.promote_types(np.promote_types(src.dtype, xs.dtype), np.float32)
    img = src.astype(work).transpose(0, 2, 3, 1)     # N, H, W, C
    b = batch.reshape(-1, 1, 1)
    bv = np.float32(border_val)

    def tap(iy, ix):
        ry, vy = border_index_np(iy, h, border)
        rx, vx = border_index_np(ix, w, border)
        val = img[b, ry, rx]                                # M, OH, OW, C
        if vy is not None:
            val = np.where((vy & vx)[..., None], val, bv)
        return val

    if nearest:
        out = tap(np.floor(ys + np.float32(0.5)).astype(np.int64),
                  np.floor(xs + np.float32(0.5)).astype(np.int64))
    else:
        fx, fy = np.floor(xs), np.floor(ys)
        ax, ay = (xs - fx)[..., None], (ys - fy)[..., None]
        x0, y0 = fx.astype(np.int64), fy.astype(np.int64)
        one = np.float32(1)
        out = (tap(y0, x0) * (one - ax) * (one - ay) + tap(y0, x0 + 1) * ax * (one - ay)
               + tap(y0 + 1, x0) * (one - ax) * ay + tap(y0 + 1, x0 + 1) * ax * ay)
        if border == "CONSTANT":
            out = np.where(np.isfinite(out), out, bv)
    return out.transpose(0, 3, 1, 2).astype(work)


# -- Relax --------------------------------------------------------------------------------
def border_index_relax(L, p, n: int, mode: str):
    R = L.R
    i32 = lambda v: L.const(v, "int32")     # noqa: E731
    if mode in ("REPLICATE", "CONSTANT") or n == 1:
        index = R.clip(p, 0, n - 1)
        if mode != "CONSTANT":
            return index, None
        valid = R.logical_and(R.greater_equal(p, i32(0)), R.less(p, i32(n)))
        return index, valid
    if mode == "WRAP":
        return R.floor_mod(p, i32(n)), None
    edge = 1 if mode == "REFLECT_101" else 0
    period = 2 * n - 2 * edge
    m = R.floor_mod(p, i32(period))
    return R.where(R.greater_equal(m, i32(n)), R.subtract(i32(period - 1 + edge), m), m), None


def sample_relax(L, src, src_shape, batch, xs, ys, *, border: str, border_val: float,
                 nearest: bool = False):
    """The Relax counterpart of `sample_np`: `batch` an int32 (M, 1, 1) expression, xs/ys
    float32 (M, OH, OW) expressions. Returns float32 (M, C, OH, OW)."""
    R = L.R
    n, c, h, w = src_shape
    rows = R.reshape(R.permute_dims(R.astype(src, "float32"), [0, 2, 3, 1]), (n * h * w, c))
    base = R.multiply(batch, L.const(h * w, "int32"))
    bv = L.const(border_val, "float32")

    def tap(iy, ix):
        ry, vy = border_index_relax(L, iy, h, border)
        rx, vx = border_index_relax(L, ix, w, border)
        flat = R.add(base, R.add(R.multiply(ry, L.const(w, "int32")), rx))
        val = R.take(rows, flat, axis=0)                    # M, OH, OW, C
        if vy is not None:
            val = R.where(R.expand_dims(R.logical_and(vy, vx), -1), val, bv)
        return val

    if nearest:
        half = L.const(0.5, "float32")
        out = tap(R.astype(R.floor(R.add(ys, half)), "int32"),
                  R.astype(R.floor(R.add(xs, half)), "int32"))
    else:
        fx, fy = R.floor(xs), R.floor(ys)
        ax, ay = R.expand_dims(R.subtract(xs, fx), -1), R.expand_dims(R.subtract(ys, fy), -1)
        x0, y0 = R.astype(fx, "int32"), R.astype(fy, "int32")
        x1, y1 = R.add(x0, L.const(1, "int32")), R.add(y0, L.const(1, "int32"))
        one = L.const(1.0, "float32")
        bx, by = R.subtract(one, ax), R.subtract(one, ay)
        out = R.add(R.add(R.multiply(R.multiply(tap(y0, x0), bx), by),
                          R.multiply(R.multiply(tap(y0, x1), ax), by)),
                    R.add(R.multiply(R.multiply(tap(y1, x0), bx), ay),
                          R.multiply(R.multiply(tap(y1, x1), ax), ay)))
        if border == "CONSTANT":
            finite = R.logical_not(R.logical_or(R.isnan(out), R.isinf(out)))
            out = R.where(finite, out, bv)
    return R.permute_dims(out, [0, 3, 1, 2])


def round_relax(L, values, dtype: str):
    """Relax counterpart of `round_to`."""
    R = L.R
    if np.dtype(dtype).kind == "f":
        return R.astype(values, dtype)
    info = np.iinfo(dtype)
    half = L.const(0.5, "float32")
    rounded = R.multiply(R.sign(values), R.floor(R.add(R.abs(values), half)))
    return R.astype(R.clip(rounded, float(info.min), float(info.max)), dtype)
