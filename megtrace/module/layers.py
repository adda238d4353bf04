"""Layers with MegEngine's constructors, parameter shapes and initialization."""
from __future__ import annotations

from typing import Tuple, Union

import numpy as np

from .. import functional as F
from ..ops._rules import pair
from ..tensor import Parameter, Tensor
from .module import Module


def _normal(shape, std: float) -> np.ndarray:
    return np.random.normal(0.0, std, size=shape).astype(np.float32)


class Linear(Module):
    """`y = x @ weight.T + bias`; weight (out_features, in_features) ~ N(0, 1/in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 compute_mode: str = "default", **kwargs):
        super().__init__(**kwargs)
        self.in_features, self.out_features = in_features, out_features
        self.compute_mode = compute_mode
        self.weight = Parameter(_normal((out_features, in_features), np.sqrt(1 / in_features)))
        self.bias = Parameter(np.zeros(out_features, np.float32)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias, compute_mode=self.compute_mode)

    def _module_info_string(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    """2D convolution; weight (OC, IC, KH, KW), or (G, OC/G, IC/G, KH, KW) with groups;
    bias (1, OC, 1, 1); weight ~ N(0, 1/(IC*KH*KW))."""

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, int]], stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, conv_mode: str = "cross_correlation",
                 compute_mode: str = "default", padding_mode: str = "zeros", **kwargs):
        super().__init__(**kwargs)
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise ValueError(f"Conv2d: padding_mode {padding_mode!r} is not supported yet; "
                             "expected 'zeros'")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = pair("kernel_size", kernel_size), pair("stride", stride)
        self.padding, self.dilation = pair("padding", padding), pair("dilation", dilation)
        self.conv_mode, self.compute_mode, self.padding_mode = conv_mode, compute_mode, padding_mode
        kh, kw = self.kernel_size
        if groups == 1:
            shape = (out_channels, in_channels, kh, kw)
        else:
            shape = (groups, out_channels // groups, in_channels // groups, kh, kw)
        self.weight = Parameter(_normal(shape, np.sqrt(1 / (kh * kw * in_channels))))
        self.bias = Parameter(np.zeros((1, out_channels, 1, 1), np.float32)) if bias else None

    def forward(self, inp):
        return F.conv2d(inp, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups, self.conv_mode, self.compute_mode)

    def _module_info_string(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"
        if self.stride != (1, 1):
            s += f", stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")


class BatchNorm2d(Module):
    """Batch normalization over (N, C, H, W); weight/bias/statistics are (1, C, 1, 1)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.9,
                 affine: bool = True, track_running_stats: bool = True, freeze: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats, self.freeze = affine, track_running_stats, freeze
        shape = (1, num_features, 1, 1)
        self.weight = Parameter(np.ones(shape, np.float32)) if affine else None
        self.bias = Parameter(np.zeros(shape, np.float32)) if affine else None
        if track_running_stats:
            self.running_mean = Tensor(np.zeros(shape, np.float32))
            self.running_var = Tensor(np.ones(shape, np.float32))
        else:
            self.running_mean = self.running_var = None

    def forward(self, inp):
        if inp.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected a 4-d input, got shape {inp.shape}")
        training = (self.training and not self.freeze) or not self.track_running_stats
        return F.batch_norm(inp, self.running_mean, self.running_var, self.weight, self.bias,
                            training=training, momentum=self.momentum, eps=self.eps,
                            inplace=self.track_running_stats)

    def _state_value(self, key: str, value: np.ndarray) -> np.ndarray:
        return value.reshape(-1)        # MegEngine's state_dict keeps BatchNorm as (C,)

    def _module_info_string(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, **kwargs):
        super().__init__(**kwargs)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, inp):
        return F.max_pool2d(inp, self.kernel_size, self.stride, self.padding)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0,
                 mode: str = "average_count_exclude_padding", **kwargs):
        super().__init__(**kwargs)
        self.kernel_size, self.stride, self.padding, self.mode = kernel_size, stride, padding, mode

    def forward(self, inp):
        return F.avg_pool2d(inp, self.kernel_size, self.stride, self.padding, self.mode)


class Sequential(Module):
    """Applies its layers in order; `Sequential(a, b)` or `Sequential(OrderedDict(...))`."""

    def __init__(self, *args, **kwargs):
        super().__init__(**kwargs)
        from collections import OrderedDict
        self.layer_keys = []
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            items = list(args[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(args)]
        for key, module in items:
            object.__setattr__(module, "_scope", key)
            object.__setattr__(self, key, module)    # "0", "1", ... as in MegEngine
            self.layer_keys.append(key)

    def __getitem__(self, idx):
        return getattr(self, self.layer_keys[idx])

    def __len__(self) -> int:
        return len(self.layer_keys)

    def forward(self, inp):
        for key in self.layer_keys:
            inp = getattr(self, key)(inp)
        return inp
