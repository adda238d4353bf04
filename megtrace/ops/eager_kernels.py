"""Fast NumPy kernels behind the eager convolution and pooling ops.

Eager mode is what notebooks run, so these avoid per-element Python work: a dense or grouped
convolution is one BLAS matmul per group over an im2col matrix laid out (C, KH, KW) x (OH*OW)
so the product lands in NCHW without a transpose; a depthwise convolution (one input channel
per group) is a sum over its KH*KW kernel taps of strided views; pooling reduces the same
taps. Results keep the input's float32 arithmetic, like MegEngine's kernels."""
from __future__ import annotations

import numpy as np


def _padded(x: np.ndarray, padding, fill=0.0) -> np.ndarray:
    ph, pw = padding
    if not ph and not pw:
        return x
    n, c, h, w = x.shape
    out = np.empty((n, c, h + 2 * ph, w + 2 * pw), x.dtype)
    if ph:
        out[:, :, :ph] = fill
        out[:, :, h + ph:] = fill
    if pw:
        out[:, :, :, :pw] = fill
        out[:, :, :, w + pw:] = fill
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def _taps(xp: np.ndarray, kernel, stride, dilation, out_hw):
    """(kh, kw, view) for every kernel tap: view[n, c, i, j] = xp[n, c, i*sh + kh*dh, ...]."""
    (oh, ow), (sh, sw), (dh, dw) = out_hw, stride, dilation
    for kh in range(kernel[0]):
        h0 = kh * dh
        for kw in range(kernel[1]):
            w0 = kw * dw
            yield kh, kw, xp[:, :, h0:h0 + sh * (oh - 1) + 1:sh, w0:w0 + sw * (ow - 1) + 1:sw]


def conv2d(x: np.ndarray, w: np.ndarray, groups: int, stride, padding, dilation,
           out_hw) -> np.ndarray:
    """NCHW convolution; `w` is (G, OC/G, IC/G, KH, KW)."""
    n, c = x.shape[:2]
    g, ocg, icg, kh, kw = w.shape
    oh, ow = out_hw
    if icg == 1 and groups > 1:
        return _depthwise(x, w, stride, padding, dilation, out_hw)
    if (kh, kw) == (1, 1) and tuple(stride) == (1, 1) and not any(padding):
        cols = x.reshape(n, g, icg, oh * ow)
    else:
        cols = np.empty((n, c, kh, kw, oh, ow), x.dtype)
        for i, j, view in _taps(_padded(x, padding), (kh, kw), stride, dilation, out_hw):
            cols[:, :, i, j] = view
        cols = cols.reshape(n, g, icg * kh * kw, oh * ow)
    out = np.matmul(w.reshape(g, ocg, icg * kh * kw), cols)      # (N, G, OC/G, OH*OW)
    return out.reshape(n, g * ocg, oh, ow)


def _depthwise(x, w, stride, padding, dilation, out_hw):
    n = x.shape[0]
    g, ocg, _, kh, kw = w.shape
    oh, ow = out_hw
    acc = np.zeros((n, g, ocg, oh, ow), x.dtype)
    taps = w[:, :, 0].transpose(2, 3, 0, 1)[..., None, None]      # (KH, KW, G, OC/G, 1, 1)
    for i, j, view in _taps(_padded(x, padding), (kh, kw), stride, dilation, out_hw):
        acc += view[:, :, None] * taps[i, j]
    return acc.reshape(n, g * ocg, oh, ow)


def pool2d_max(x: np.ndarray, kernel, stride, padding, out_hw) -> np.ndarray:
    """Max pooling; padding never wins (it is the dtype's lowest value)."""
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    out = None
    for _, _, view in _taps(_padded(x, padding, lowest), kernel, stride, (1, 1), out_hw):
        out = view.copy() if out is None else np.maximum(out, view, out=out)
    return out


def pool2d_sum(x: np.ndarray, kernel, stride, padding, out_hw) -> np.ndarray:
    """Window sums in float64 (zero padding), for average pooling."""
    out = np.zeros(x.shape[:2] + tuple(out_hw), np.float64)
    for _, _, view in _taps(_padded(x, padding), kernel, stride, (1, 1), out_hw):
        out += view
    return out
