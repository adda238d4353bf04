"""Parameter-free image layers: Pad, PixelShuffle, SlidingWindow, SlidingWindowTranspose and
DeformablePSROIPooling (MegEngine 1.13's module/padding.py, pixel_shuffle.py,
sliding_window.py, deformable_psroi_pooling.py). Each keeps MegEngine's attribute names
and forwards to the functional of the same name."""
from __future__ import annotations

from typing import Tuple, Union

from .. import functional as F
from .module import Module

IntPair = Union[int, Tuple[int, int]]


class Pad(Module):
    """F.nn.pad with fixed `pad_width`, `mode` and `constant_val` (kept as `pad_val`)."""

    def __init__(self, pad_width: Tuple[Tuple[int, int], ...], mode: str = "constant",
                 constant_val: float = 0.0):
        super().__init__()
        self.pad_width, self.mode, self.pad_val = pad_width, mode, constant_val

    def forward(self, src):
        return F.nn.pad(src, pad_width=self.pad_width, mode=self.mode,
                        constant_value=self.pad_val)


class PixelShuffle(Module):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r)."""

    def __init__(self, upscale_factor: int, **kwargs):
        super().__init__(**kwargs)
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return F.pixel_shuffle(x, self.upscale_factor)


class SlidingWindow(Module):
    """(N, C, H, W) -> (N, C, OH, OW, window_h, window_w) windows, as in a convolution."""

    def __init__(self, kernel_size: IntPair, padding: IntPair = 0, stride: IntPair = 1,
                 dilation: IntPair = 1, **kwargs):
        super().__init__(**kwargs)
        self.kernel_size, self.padding, self.stride, self.dilation = \
            kernel_size, padding, stride, dilation

    def forward(self, inp):
        return F.sliding_window(inp, self.kernel_size, self.padding, self.stride, self.dilation)


class SlidingWindowTranspose(Module):
    """Sums (N, C, IH, IW, window_h, window_w) windows back onto (N, C, *output_size)."""

    def __init__(self, output_size: IntPair, kernel_size: IntPair, padding: IntPair = 0,
                 stride: IntPair = 1, dilation: IntPair = 1, **kwargs):
        super().__init__(**kwargs)
        self.output_size, self.kernel_size, self.padding, self.stride, self.dilation = \
            output_size, kernel_size, padding, stride, dilation

    def forward(self, inp):
        return F.sliding_window_transpose(inp, self.output_size, self.kernel_size, self.padding,
                                          self.stride, self.dilation)


class DeformablePSROIPooling(Module):
    """F.deformable_psroi_pooling with fixed pooling parameters; forward(inp, rois, trans)."""

    def __init__(self, no_trans, part_size, pooled_h, pooled_w, sample_per_part, spatial_scale,
                 trans_std: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.no_trans, self.part_size, self.pooled_h, self.pooled_w = \
            no_trans, part_size, pooled_h, pooled_w
        self.sample_per_part, self.spatial_scale, self.trans_std = \
            sample_per_part, spatial_scale, trans_std

    def forward(self, inp, rois, trans):
        return F.deformable_psroi_pooling(inp, rois, trans, self.no_trans, self.part_size,
                                          self.pooled_h, self.pooled_w, self.sample_per_part,
                                          self.spatial_scale, self.trans_std)
