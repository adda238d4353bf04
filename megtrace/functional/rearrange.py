"""Functionals that rearrange image elements: pixel_shuffle (a reshape-transpose-reshape,
as MegEngine composes it), sliding_window (Images2Neibs) and sliding_window_transpose."""
from __future__ import annotations

from typing import Tuple, Union

from ..dispatch import apply
from ..ops._rules import pair
from ..tensor import Tensor
from ._convert import require_tensor
from .tensor_ops import reshape, transpose

__all__ = ["pixel_shuffle", "sliding_window", "sliding_window_transpose"]

IntPair = Union[int, Tuple[int, int]]


def pixel_shuffle(inp: Tensor, upscale_factor: int) -> Tensor:
    """(..., C * r * r, H, W) -> (..., C, H * r, W * r)."""
    x = require_tensor("pixel_shuffle", inp)
    r = int(upscale_factor)
    assert r > 0, "upscale_factor should larger than 0"
    assert x.ndim >= 3, "the input dimension of pixel_shuffle should be larger than 3"
    assert x.shape[-3] % (r * r) == 0, "the -3 dimension should be divided by (upscale_factor ** 2)"
    *high, c, h, w = x.shape
    n = 1
    for d in high:
        n *= d
    y = reshape(x, (n, c // (r * r), r, r, h, w))
    y = transpose(y, (0, 1, 4, 2, 5, 3))
    return reshape(y, (*high, c // (r * r), h * r, w * r))


def _window_params(kernel_size, padding, stride, dilation) -> dict:
    return {"window": pair("kernel_size", kernel_size), "padding": pair("padding", padding),
            "stride": pair("stride", stride), "dilation": pair("dilation", dilation)}


def sliding_window(inp: Tensor, kernel_size: IntPair, padding: IntPair = 0, stride: IntPair = 1,
                   dilation: IntPair = 1) -> Tensor:
    """(N, C, H, W) -> (N, C, OH, OW, wh, ww): the window at each output position
    (zero padding)."""
    return apply("sliding_window", require_tensor("sliding_window", inp),
                 **_window_params(kernel_size, padding, stride, dilation))


def sliding_window_transpose(inp: Tensor, output_size: IntPair, kernel_size: IntPair,
                             padding: IntPair = 0, stride: IntPair = 1,
                             dilation: IntPair = 1) -> Tensor:
    """The adjoint of sliding_window: windows summed back onto an (N, C, *output_size)
    image."""
    x = require_tensor("sliding_window_transpose", inp)
    params = _window_params(kernel_size, padding, stride, dilation)
    out = pair("output_size", output_size)
    (ph, pw), (sh, sw), (dh, dw), (wh, ww) = (params[k] for k in
                                              ("padding", "stride", "dilation", "window"))
    expected_h = (out[0] + 2 * ph - dh * (wh - 1) - 1) // sh + 1
    expected_w = (out[1] + 2 * pw - dw * (ww - 1) - 1) // sw + 1
    assert x.ndim == 6, "the input dimension of sliding_window_transpose should be 6"
    assert x.shape[2] == expected_h and x.shape[3] == expected_w, \
        "the input shape and output size do not match"
    return apply("sliding_window_transpose", x, out=out, **params)
