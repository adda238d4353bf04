"""Source coordinates of megdnn's OpenCV-derived NHWC warp_perspective kernel (x86
warp_perspective_cv, float32/uint8 images of 1 to 3 channels), in NumPy and Relax.

The kernel evaluates the matrix in double, per block of output columns (a row's start
column, then `+ m * x1` along the block), scales by 32 / denominator (0 when the
denominator is 0), clamps to int32, rounds half to even (cvRound), and keeps the integer
part (saturated to int16) and the low 5 bits as a 1/32-pixel fraction. Its bilinear
taps and border rules are then those of `_sampling` (uint8 weights are exact multiples of
1/1024, so the float sampler rounds as OpenCV's 15-bit fixed point does).
"""
from __future__ import annotations

import numpy as np

_TAB = 32                       # INTER_TAB_SIZE: 1/32-pixel fractions
_BLOCK = 32                     # the kernel's BLOCK_SZ
_INT_MIN, _INT_MAX = -2.0 ** 31, 2.0 ** 31 - 1
_SHORT_MIN, _SHORT_MAX = -32768.0, 32767.0


def cv_fixed_point(channels: int, dtype) -> bool:
    """Whether megdnn's x86 kernel takes the OpenCV path for an NHWC image (warp_common's
    is_cv_available); other NHWC images take the naive float kernel."""
    return channels in (1, 2, 3) and str(dtype) in ("float32", "uint8")


def _grid64(out):
    """Output rows, block start columns and offsets in the block, float64."""
    oh, ow = out
    bh = min(_BLOCK // 2, oh)
    bw = min(_BLOCK * _BLOCK // bh, ow)
    cols = np.arange(ow, dtype=np.float64).reshape(1, 1, ow)
    start = np.floor(cols / bw) * bw
    return np.arange(oh, dtype=np.float64).reshape(1, oh, 1), start, cols - start


def _split(q):
    """Rounded 1/32-pixel coordinates -> float32 pixel coordinates (int16-saturated
    integer part plus the 5-bit fraction)."""
    whole = np.floor(q / _TAB)
    return (np.clip(whole, _SHORT_MIN, _SHORT_MAX) + (q - whole * _TAB) / _TAB
            ).astype(np.float32)


def perspective_coords_np(mat: np.ndarray, out) -> tuple[np.ndarray, np.ndarray]:
    """(xs, ys), each float32 (M, OH, OW), for float32 (M, 3, 3) matrices."""
    m = mat.astype(np.float64).reshape(-1, 9, 1, 1)
    rows, start, step = _grid64(out)

    def at(i):
        return m[:, i] * start + m[:, i + 1] * rows + m[:, i + 2] + m[:, i] * step

    den = at(6)
    scale = np.where(den != 0, _TAB / np.where(den != 0, den, 1.0), 0.0)

    def axis(i):
        return _split(np.rint(np.clip(at(i) * scale, _INT_MIN, _INT_MAX)))
    return axis(0), axis(3)


def perspective_coords_relax(L, mat, n_mat: int, out):
    """The Relax counterpart of `perspective_coords_np` (float32 (M, OH, OW) each)."""
    R = L.R
    m = R.astype(R.reshape(mat, (n_mat, 9, 1, 1)), "float64")
    rows, start, step = (L.const(g, "float64") for g in _grid64(out))
    f64 = lambda v: L.const(float(v), "float64")     # noqa: E731

    def coef(i):
        return R.reshape(R.strided_slice(m, axes=[1], begin=[i], end=[i + 1]), (n_mat, 1, 1))

    def at(i):
        head = R.add(R.add(R.multiply(coef(i), start), R.multiply(coef(i + 1), rows)),
                     coef(i + 2))
        return R.add(head, R.multiply(coef(i), step))

    den = at(6)
    nonzero = R.not_equal(den, f64(0))
    scale = R.where(nonzero, R.divide(f64(_TAB), R.where(nonzero, den, f64(1))), f64(0))

    def axis(i):
        q = R.round(R.minimum(R.maximum(R.multiply(at(i), scale), f64(_INT_MIN)),
                              f64(_INT_MAX)))
        whole = R.floor(R.divide(q, f64(_TAB)))
        frac = R.divide(R.subtract(q, R.multiply(whole, f64(_TAB))), f64(_TAB))
        clamped = R.minimum(R.maximum(whole, f64(_SHORT_MIN)), f64(_SHORT_MAX))
        return R.astype(R.add(clamped, frac), "float32")
    return axis(0), axis(3)
