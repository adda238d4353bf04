"""Fused float modules of MegEngine (conv/linear + BatchNorm [+ ReLU]): plain
compositions whose submodules are named `conv`, `conv_transpose2d`, `linear` and `bn`,
so their state dicts match MegEngine's."""
from __future__ import annotations

import numpy as np

from .. import functional as F
from ..tensor import Parameter
from .batchnorm import BatchNorm1d, BatchNorm2d
from .conv import Conv2d, ConvTranspose2d
from .layers import Linear
from .module import Module


class _ConvBnActivation2d(Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1,
                 padding=0, dilation=1, groups: int = 1, bias: bool = True,
                 conv_mode: str = "cross_correlation", compute_mode: str = "default",
                 eps=1e-5, momentum=0.9, affine=True, track_running_stats=True,
                 padding_mode: str = "zeros", **kwargs):
        super().__init__(**kwargs)
        self.conv = Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation,
                           groups, bias, conv_mode, compute_mode, padding_mode, **kwargs)
        self.bn = BatchNorm2d(out_channels, eps, momentum, affine, track_running_stats)


class ConvBn2d(_ConvBnActivation2d):
    def forward(self, inp):
        return self.bn(self.conv(inp))


class ConvBnRelu2d(_ConvBnActivation2d):
    def forward(self, inp):
        return F.relu(self.bn(self.conv(inp)))


class _ConvTransposeBnActivation2d(Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1,
                 padding=0, output_padding=0, dilation=1, groups: int = 1, bias: bool = True,
                 conv_mode: str = "cross_correlation", compute_mode: str = "default",
                 eps=1e-5, momentum=0.9, affine=True, track_running_stats=True, **kwargs):
        super().__init__(**kwargs)
        self.conv_transpose2d = ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation,
            groups, bias, conv_mode, compute_mode, **kwargs)
        self.bn = BatchNorm2d(out_channels, eps, momentum, affine, track_running_stats)


class ConvTransposeBn2d(_ConvTransposeBnActivation2d):
    def forward(self, inp):
        return self.bn(self.conv_transpose2d(inp))


class ConvTransposeBnRelu2d(_ConvTransposeBnActivation2d):
    def forward(self, inp):
        return F.relu(self.bn(self.conv_transpose2d(inp)))


class _LinearBnActivation1d(Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 compute_mode: str = "default", eps=1e-5, momentum=0.9, affine=True,
                 track_running_stats=True, **kwargs):
        super().__init__(**kwargs)
        self.out_features, self.in_features = out_features, in_features
        # MegEngine keeps an (unused) bias of its own besides the linear's.
        self.bias = Parameter(np.zeros((out_features,), np.float32)) if bias else None
        self.linear = Linear(in_features, out_features, bias, compute_mode, **kwargs)
        self.bn = BatchNorm1d(out_features, eps, momentum, affine, track_running_stats)


class LinearBn1d(_LinearBnActivation1d):
    def forward(self, inp):
        return self.bn(self.linear(inp))


class LinearBnRelu1d(_LinearBnActivation1d):
    def forward(self, inp):
        return F.relu(self.bn(self.linear(inp)))
