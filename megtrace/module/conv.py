"""Convolution layers with MegEngine 1.13's constructors, weight layouts and
initialization (weight ~ N(0, 1/fan_in) through `init.normal_`, bias zeros)."""
from __future__ import annotations

from abc import abstractmethod
from typing import Tuple, Union

import numpy as np

from .. import functional as F
from ..functional.conv import ntuple
from ..tensor import Parameter
from . import init
from .module import Module

IntOrTuple = Union[int, Tuple[int, ...]]


def _nonzero(name: str, value, n: int) -> tuple[int, ...]:
    out = ntuple(name, value, n)
    if any(v == 0 for v in out):
        raise AssertionError(f"{name} must not contain 0, got {value!r}")
    return out


class _ConvNd(Module):
    """Shared constructor: checks groups, creates weight/bias of the layout the subclass
    infers, then `reset_parameters()`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 output_padding, dilation, groups: int, bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.output_padding, self.dilation, self.groups = output_padding, dilation, groups
        self.weight = Parameter(np.zeros(self._infer_weight_shape(), dtype=np.float32))
        self.bias = None
        if bias:
            self.bias = Parameter(np.zeros(self._infer_bias_shape(), dtype=np.float32))
        self.reset_parameters()

    @abstractmethod
    def _get_fanin(self) -> int:
        pass

    @abstractmethod
    def _infer_weight_shape(self) -> tuple[int, ...]:
        pass

    @abstractmethod
    def _infer_bias_shape(self) -> tuple[int, ...]:
        pass

    def reset_parameters(self) -> None:
        init.normal_(self.weight, 0.0, float(np.sqrt(1 / self._get_fanin())))
        if self.bias is not None:
            init.zeros_(self.bias)

    def _module_info_string(self) -> str:
        def not_all(value, v) -> bool:
            return value != (v,) * len(value) if isinstance(value, tuple) else value != v

        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"
        if not_all(self.stride, 1):
            s += f", stride={self.stride}"
        if not_all(self.padding, 0):
            s += f", padding={self.padding}"
        if not_all(self.dilation, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s

    def _conv_weight_shape(self, kernel: tuple[int, ...], transposed: bool = False):
        """Dense (A, B, *k) or grouped (G, A/G, B/G, *k), A/B = out/in channels (swapped
        for transposed convolution)."""
        a, b = (self.in_channels, self.out_channels) if transposed else \
            (self.out_channels, self.in_channels)
        if self.groups == 1:
            return (a, b) + kernel
        return (self.groups, a // self.groups, b // self.groups) + kernel


def _check_padding_mode(padding_mode: str) -> None:
    if padding_mode not in ("zeros", "reflect", "replicate"):
        raise AssertionError(f"padding_mode must be 'zeros', 'reflect' or 'replicate'; got "
                             f"{padding_mode!r}")


class Conv1d(_ConvNd):
    """1D convolution over (N, C, L); weight (OC, IC, K); kernel_size etc. stay ints, as
    in MegEngine."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int,
                 stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1,
                 bias: bool = True, conv_mode: str = "cross_correlation",
                 compute_mode: str = "default", padding_mode: str = "zeros", **kwargs):
        _check_padding_mode(padding_mode)
        self.conv_mode, self.compute_mode, self.padding_mode = conv_mode, compute_mode, \
            padding_mode
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, 0,
                         dilation, groups, bias, **kwargs)

    def _get_fanin(self) -> int:
        return self.kernel_size * self.in_channels

    def _infer_weight_shape(self):
        return self._conv_weight_shape((self.kernel_size,))

    def _infer_bias_shape(self):
        return (1, self.out_channels, 1)

    def get_pad_witdth(self):
        """The pad width of `padding_mode` padding (MegEngine's name, typo included)."""
        return ((0, 0), (0, 0), (self.padding, self.padding))

    def calc_conv(self, inp, weight, bias):
        if self.padding_mode != "zeros":
            inp = F.pad(inp, ((0, 0), (0, 0), (self.padding, self.padding)), self.padding_mode)
            return F.conv1d(inp, weight, bias, self.stride, 0, self.dilation, self.groups,
                            self.conv_mode, self.compute_mode)
        return F.conv1d(inp, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups, self.conv_mode, self.compute_mode)

    def forward(self, inp):
        return self.calc_conv(inp, self.weight, self.bias)


class Conv2d(_ConvNd):
    """2D convolution; weight (OC, IC, KH, KW), grouped (G, OC/G, IC/G, KH, KW);
    bias (1, OC, 1, 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                 groups: int = 1, bias: bool = True, conv_mode: str = "cross_correlation",
                 compute_mode: str = "default", padding_mode: str = "zeros", **kwargs):
        _check_padding_mode(padding_mode)
        self.conv_mode, self.compute_mode, self.padding_mode = conv_mode, compute_mode, \
            padding_mode
        super().__init__(in_channels, out_channels, _nonzero("kernel_size", kernel_size, 2),
                         _nonzero("stride", stride, 2), ntuple("padding", padding, 2), 0,
                         _nonzero("dilation", dilation, 2), groups, bias, **kwargs)

    def _get_fanin(self) -> int:
        kh, kw = self.kernel_size
        return kh * kw * self.in_channels

    def get_pad_witdth(self):
        """The pad width of `padding_mode` padding (MegEngine's name, typo included)."""
        return ((0, 0), (0, 0), (self.padding[0], self.padding[0]),
                (self.padding[1], self.padding[1]))

    def _infer_weight_shape(self):
        return self._conv_weight_shape(self.kernel_size)

    def _infer_bias_shape(self):
        return (1, self.out_channels, 1, 1)

    def get_pad_witdth(self):   # MegEngine's spelling
        ph, pw = self.padding
        return ((0, 0), (0, 0), (ph, ph), (pw, pw))

    def calc_conv(self, inp, weight, bias):
        if self.padding_mode != "zeros":
            return F.conv2d(F.pad(inp, self.get_pad_witdth(), self.padding_mode), weight, bias,
                            self.stride, 0, self.dilation, self.groups, self.conv_mode,
                            self.compute_mode)
        return F.conv2d(inp, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups, self.conv_mode, self.compute_mode)

    def forward(self, inp):
        return self.calc_conv(inp, self.weight, self.bias)


class Conv3d(_ConvNd):
    """3D convolution (NCDHW); weight (OC, IC, KD, KH, KW), grouped (G, OC/G, IC/G, ...);
    bias (1, OC, 1, 1, 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                 groups: int = 1, bias: bool = True, conv_mode: str = "cross_correlation"):
        self.conv_mode = conv_mode
        super().__init__(in_channels, out_channels, _nonzero("kernel_size", kernel_size, 3),
                         _nonzero("stride", stride, 3), ntuple("padding", padding, 3), 0,
                         _nonzero("dilation", dilation, 3), groups, bias)

    def _get_fanin(self) -> int:
        return int(np.prod(self.kernel_size)) * self.in_channels

    def _infer_weight_shape(self):
        return self._conv_weight_shape(self.kernel_size)

    def _infer_bias_shape(self):
        return (1, self.out_channels, 1, 1, 1)

    def calc_conv(self, inp, weight, bias):
        return F.conv3d(inp, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups, self.conv_mode)

    def forward(self, inp):
        return self.calc_conv(inp, self.weight, self.bias)


class ConvTranspose2d(_ConvNd):
    """2D transposed convolution; weight (IC, OC, KH, KW), grouped (G, IC/G, OC/G, KH, KW);
    fan-in counts output channels, as in MegEngine."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                 output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1,
                 bias: bool = True, conv_mode: str = "cross_correlation",
                 compute_mode: str = "default", **kwargs):
        self.conv_mode, self.compute_mode = conv_mode, compute_mode
        super().__init__(in_channels, out_channels, _nonzero("kernel_size", kernel_size, 2),
                         _nonzero("stride", stride, 2), ntuple("padding", padding, 2),
                         ntuple("output_padding", output_padding, 2),
                         _nonzero("dilation", dilation, 2), groups, bias, **kwargs)

    def _get_fanin(self) -> int:
        kh, kw = self.kernel_size
        return kh * kw * self.out_channels

    def _infer_weight_shape(self):
        return self._conv_weight_shape(self.kernel_size, transposed=True)

    def _infer_bias_shape(self):
        return (1, self.out_channels, 1, 1)

    def calc_conv_transpose2d(self, inp, weight, bias):
        return F.conv_transpose2d(inp, weight, bias, self.stride, self.padding,
                                  self.output_padding, self.dilation, self.groups,
                                  self.conv_mode, self.compute_mode)

    def forward(self, inp):
        return self.calc_conv_transpose2d(inp, self.weight, self.bias)


class ConvTranspose3d(_ConvNd):
    """3D transposed convolution; weight (IC, OC, KD, KH, KW), grouped
    (G, IC/G, OC/G, KD, KH, KW)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                 output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1,
                 bias: bool = True):
        super().__init__(in_channels, out_channels, _nonzero("kernel_size", kernel_size, 3),
                         _nonzero("stride", stride, 3), ntuple("padding", padding, 3),
                         output_padding, _nonzero("dilation", dilation, 3), groups, bias)

    def _get_fanin(self) -> int:
        return int(np.prod(self.kernel_size)) * self.in_channels

    def _infer_weight_shape(self):
        return self._conv_weight_shape(self.kernel_size, transposed=True)

    def _infer_bias_shape(self):
        return (1, self.out_channels, 1, 1, 1)

    def forward(self, inp):
        return F.conv_transpose3d(inp, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.dilation, self.groups)


class LocalConv2d(Conv2d):
    """Locally connected 2D layer for a fixed input size: weight
    (G, OH, OW, IC/G, KH, KW, OC/G), no bias."""

    def __init__(self, in_channels: int, out_channels: int, input_height: int,
                 input_width: int, kernel_size: IntOrTuple, stride: IntOrTuple = 1,
                 padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1,
                 conv_mode: str = "cross_correlation", **kwargs):
        self.input_height, self.input_width = input_height, input_width
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias=False, conv_mode=conv_mode, **kwargs)

    def _infer_weight_shape(self):
        (kh, kw), (sh, sw), (ph, pw) = self.kernel_size, self.stride, self.padding
        oh = (self.input_height + 2 * ph - kh) // sh + 1
        ow = (self.input_width + 2 * pw - kw) // sw + 1
        g = self.groups
        return (g, oh, ow, self.in_channels // g, kh, kw, self.out_channels // g)

    def forward(self, inp):
        return F.local_conv2d(inp, self.weight, None, self.stride, self.padding,
                              self.dilation, self.conv_mode)


class ConvRelu2d(Conv2d):
    def forward(self, inp):
        return F.relu(self.calc_conv(inp, self.weight, self.bias))


class ConvTransposeRelu2d(ConvTranspose2d):
    def forward(self, inp):
        return F.relu(self.calc_conv_transpose2d(inp, self.weight, self.bias))


class DeformableConv2d(_ConvNd):
    """Deformable convolution v2; `forward(inp, offset, mask)`; weight as Conv2d's."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                 groups: int = 1, bias: bool = True, conv_mode: str = "cross_correlation",
                 compute_mode: str = "default", **kwargs):
        self.conv_mode, self.compute_mode = conv_mode, compute_mode
        super().__init__(in_channels, out_channels, _nonzero("kernel_size", kernel_size, 2),
                         _nonzero("stride", stride, 2), ntuple("padding", padding, 2), 0,
                         _nonzero("dilation", dilation, 2), groups, bias, **kwargs)

    def _get_fanin(self) -> int:
        kh, kw = self.kernel_size
        return kh * kw * self.in_channels

    def _infer_weight_shape(self):
        return self._conv_weight_shape(self.kernel_size)

    def _infer_bias_shape(self):
        return (1, self.out_channels, 1, 1)

    def calc_conv(self, inp, weight, offset, mask, bias):
        return F.deformable_conv2d(inp, weight, offset, mask, bias, self.stride, self.padding,
                                   self.dilation, self.groups, self.conv_mode,
                                   self.compute_mode)

    def forward(self, inp, offset, mask):
        return self.calc_conv(inp, self.weight, offset, mask, self.bias)


class RegionRestrictedConv(_ConvNd):
    """Region restricted 2D convolution (`F.region_restricted_conv`): always grouped,
    weight (G, OC/G, IC/G, KH, KW), bias (1, OC, 1, 1); `forward(inp, rin, rout)`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 groups: int = 1, bias: bool = True, stride: IntOrTuple = 1,
                 padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                 conv_mode: str = "cross_correlation", compute_mode: str = "default",
                 padding_mode: str = "zeros", **kwargs):
        _check_padding_mode(padding_mode)
        self.conv_mode, self.compute_mode, self.padding_mode = conv_mode, compute_mode, \
            padding_mode
        super().__init__(in_channels, out_channels, _nonzero("kernel_size", kernel_size, 2),
                         _nonzero("stride", stride, 2), ntuple("padding", padding, 2), 0,
                         _nonzero("dilation", dilation, 2), groups, bias, **kwargs)

    def _get_fanin(self) -> int:
        kh, kw = self.kernel_size
        return kh * kw * self.in_channels

    def _infer_weight_shape(self):
        g = self.groups
        return (g, self.out_channels // g, self.in_channels // g) + tuple(self.kernel_size)

    def _infer_bias_shape(self):
        return (1, self.out_channels, 1, 1)

    def get_pad_width(self):
        return ((0, 0), (0, 0), (self.padding[0],) * 2, (self.padding[1],) * 2)

    def calc_conv(self, inp, weight, rin, rout, bias):
        return F.region_restricted_conv(inp, weight, rin, rout, bias, self.stride,
                                        self.padding, self.dilation, self.groups,
                                        self.conv_mode, self.compute_mode)

    def forward(self, inp, rin, rout):
        return self.calc_conv(inp, self.weight, rin, rout, self.bias)
