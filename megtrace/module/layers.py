"""Linear, ReLU, pooling and Sequential layers with MegEngine's constructors,
initialization and repr."""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Tuple, Union

import numpy as np

from .. import functional as F
from ..tensor import Parameter
from . import init
from .module import Module


class Linear(Module):
    """`y = x @ weight.T + bias`; weight (out_features, in_features) ~ N(0, 1/in_features),
    bias zeros."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 compute_mode: str = "default", **kwargs):
        super().__init__(**kwargs)
        self.out_features, self.in_features = out_features, in_features
        self.weight = Parameter(np.zeros((out_features, in_features), np.float32))
        self.bias = Parameter(np.zeros((out_features,), np.float32)) if bias else None
        self.compute_mode = compute_mode
        self.reset_parameters()

    def _get_fanin(self) -> int:
        return self.in_features

    def reset_parameters(self) -> None:
        init.normal_(self.weight, 0.0, float(np.sqrt(1 / self._get_fanin())))
        if self.bias is not None:
            init.zeros_(self.bias)

    def calc_linear(self, x, weight, bias):
        return F.linear(x, weight, bias, compute_mode=self.compute_mode)

    def forward(self, x):
        return self.calc_linear(x, self.weight, self.bias)

    def _module_info_string(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class LinearRelu(Linear):
    def forward(self, inp):
        return F.relu(self.calc_linear(inp, self.weight, self.bias))


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


IntPair = Union[int, Tuple[int, int]]


class _PoolNd(Module):
    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None,
                 padding: IntPair = 0, **kwargs):
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride or kernel_size
        self.padding = padding

    def _module_info_string(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_PoolNd):
    def forward(self, inp):
        return F.max_pool2d(inp, self.kernel_size, self.stride, self.padding)


class AvgPool2d(_PoolNd):
    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None,
                 padding: IntPair = 0, mode: str = "average_count_exclude_padding", **kwargs):
        super().__init__(kernel_size, stride, padding, **kwargs)
        self.mode = mode

    def forward(self, inp):
        return F.avg_pool2d(inp, self.kernel_size, self.stride, self.padding, self.mode)

    def _module_info_string(self) -> str:
        return f"{super()._module_info_string()}, mode={self.mode}"


class Sequential(Module):
    """Applies its layers in order; `Sequential(a, b)` names them "0", "1", ...;
    `Sequential(OrderedDict(...))` keeps the given names."""

    def __init__(self, *args, **kwargs):
        super().__init__(**kwargs)
        self.layer_keys = []
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            items = list(args[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(args)]
        for key, module in items:
            setattr(self, key, module)
            self.layer_keys.append(key)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(zip(self.layer_keys[idx], self.layer_values[idx])))
        return getattr(self, self.layer_keys[idx])

    def __setitem__(self, idx, module) -> None:
        setattr(self, self.layer_keys[idx], module)

    def __delitem__(self, idx) -> None:
        keys = self.layer_keys[idx] if isinstance(idx, slice) else [self.layer_keys[idx]]
        for key in keys:
            delattr(self, key)
            self.layer_keys.remove(key)

    def __len__(self) -> int:
        return len(self.layer_keys)

    def __iter__(self):
        return iter(self.layer_values)

    @property
    def layer_values(self) -> list:
        return [getattr(self, key) for key in self.layer_keys]

    def forward(self, inp):
        # layer_values inlined (one call fewer per Sequential in every replay, issue 11)
        for layer in [getattr(self, key) for key in self.layer_keys]:
            inp = layer(inp)
        return inp
