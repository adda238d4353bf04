"""Fast NumPy kernels behind the eager convolution and pooling ops.

Eager mode is what notebooks run, so these avoid per-element Python work: a dense or
grouped convolution is one BLAS matmul per group over an im2col matrix laid out
(C, KH, KW) x (OH*OW), so the product lands in NCHW without a transpose; a depthwise
convolution (one input channel per group) is a sum over its KH*KW kernel taps and pooling
reduces the same taps, each tap one contiguous slice of the input (see FlatTaps), since
NumPy is slow on the short inner loops of strided views. Results keep the input's float32
arithmetic, like MegEngine's kernels."""
from __future__ import annotations

import numpy as np


class FlatTaps:
    """Kernel taps as contiguous 1-D slices.

    The padded input is split into stride-phase planes (rows a::sh, columns b::sw), each
    laid out with one common row width Wq and flattened per channel. Tap (kh, kw) of every
    output position (i, j) then sits at flat index i*Wq + j + offset in one plane, so a tap
    over all outputs is the contiguous slice [offset, offset + oh*Wq): results are computed
    on an oh x Wq grid whose last Wq - ow columns are discarded (`crop`)."""

    def __init__(self, x, kernel, stride, padding, dilation, out_hw, fill=0.0):
        n, c, h, w = x.shape
        (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, padding, dilation, out_hw
        self.out_hw = out_hw
        max_r = ((kernel[0] - 1) * dh) // sh
        max_c = ((kernel[1] - 1) * dw) // sw
        self.wq = wq = ow + max_c
        hq = oh + max_r + 1          # one spare row: the last tap's slice overruns by max_c
        planes = np.full((sh * sw, n, c, hq, wq), fill, x.dtype)
        for a in range(sh):
            for b in range(sw):
                # plane rows r hold padded rows a + r*sh, i.e. input rows a + r*sh - ph
                r0 = max(0, -(-(ph - a) // sh))                 # first r with input row >= 0
                r1 = min(hq, (h - 1 + ph - a) // sh + 1)
                c0 = max(0, -(-(pw - b) // sw))
                c1 = min(wq, (w - 1 + pw - b) // sw + 1)
                if r1 > r0 and c1 > c0:
                    planes[a * sw + b, :, :, r0:r1, c0:c1] = x[
                        :, :, a + r0 * sh - ph:a + (r1 - 1) * sh - ph + 1:sh,
                        b + c0 * sw - pw:b + (c1 - 1) * sw - pw + 1:sw]
        self.flat = planes.reshape(sh * sw, n, c, hq * wq)
        self.length = oh * wq
        self.taps = []
        for kh in range(kernel[0]):
            for kw in range(kernel[1]):
                a, r = divmod(kh * dh, sh)[::-1]
                b, cc = divmod(kw * dw, sw)[::-1]
                self.taps.append((kh, kw, a * sw + b, r * wq + cc))

    def tap(self, plane, offset):
        return self.flat[plane, :, :, offset:offset + self.length]

    def crop(self, y):
        """(..., oh*Wq) results -> (..., oh, ow)."""
        oh, ow = self.out_hw
        return y.reshape(y.shape[:-1] + (oh, self.wq))[..., :ow]


def _strided_taps(x, kernel, stride, padding, dilation, out_hw):
    """(kh, kw, view) per tap: view[n, c, i, j] = padded x[n, c, i*sh + kh*dh, j*sw + kw*dw]."""
    (oh, ow), (sh, sw), (dh, dw), (ph, pw) = out_hw, stride, dilation, padding
    xp = x
    if ph or pw:
        xp = np.zeros(x.shape[:2] + (x.shape[2] + 2 * ph, x.shape[3] + 2 * pw), x.dtype)
        xp[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]] = x
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            h0, w0 = kh * dh, kw * dw
            yield kh, kw, xp[:, :, h0:h0 + sh * (oh - 1) + 1:sh, w0:w0 + sw * (ow - 1) + 1:sw]


def conv2d(x: np.ndarray, w: np.ndarray, groups: int, stride, padding, dilation,
           out_hw) -> np.ndarray:
    """NCHW convolution; `w` is (G, OC/G, IC/G, KH, KW)."""
    n, c = x.shape[:2]
    g, ocg, icg, kh, kw = w.shape
    oh, ow = out_hw
    if icg == 1 and groups > 1:
        return _depthwise(x, w, stride, padding, dilation, out_hw)
    weights = w.reshape(g, ocg, icg * kh * kw)
    if (kh, kw) == (1, 1) and tuple(stride) == (1, 1) and not any(padding):
        return np.matmul(weights, x.reshape(n, g, icg, oh * ow)).reshape(n, g * ocg, oh, ow)
    # Strided tap views here, not FlatTaps: its Wq - ow extra columns would cost more in the
    # matmul than the short copies below.
    cols = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for i, j, view in _strided_taps(x, (kh, kw), stride, padding, dilation, out_hw):
        cols[:, :, i, j] = view
    cols = cols.reshape(n, g, icg * kh * kw, oh * ow)
    return np.matmul(weights, cols).reshape(n, g * ocg, oh, ow)


def _depthwise(x, w, stride, padding, dilation, out_hw):
    n = x.shape[0]
    g, ocg, _, kh, kw = w.shape
    ft = FlatTaps(x, (kh, kw), stride, padding, dilation, out_hw)
    acc = np.zeros((n, g, ocg, ft.length), x.dtype)
    tmp = np.empty_like(acc)
    taps = w[:, :, 0]                                              # (G, OC/G, KH, KW)
    for i, j, plane, offset in ft.taps:
        np.multiply(ft.tap(plane, offset)[:, :, None], taps[:, :, i, j, None], out=tmp)
        acc += tmp
    return np.ascontiguousarray(ft.crop(acc)).reshape(n, g * ocg, *out_hw)


def pool2d_max(x: np.ndarray, kernel, stride, padding, out_hw) -> np.ndarray:
    """Max pooling; padding never wins (it is the dtype's lowest finite value, so a window
    lying wholly in the padding gives -FLT_MAX as in MegEngine and the compiled graph)."""
    lowest = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    ft = FlatTaps(x, kernel, stride, padding, (1, 1), out_hw, fill=lowest)
    out = None
    for _, _, plane, offset in ft.taps:
        view = ft.tap(plane, offset)
        out = view.copy() if out is None else np.maximum(out, view, out=out)
    return np.ascontiguousarray(ft.crop(out))


def pool2d_sum(x: np.ndarray, kernel, stride, padding, out_hw) -> np.ndarray:
    """Window sums in float64 (zero padding), for average pooling."""
    ft = FlatTaps(x, kernel, stride, padding, (1, 1), out_hw)
    out = np.zeros(x.shape[:2] + (ft.length,), np.float64)
    for _, _, plane, offset in ft.taps:
        out += ft.tap(plane, offset)
    return np.ascontiguousarray(ft.crop(out))
