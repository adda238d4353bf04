"""Group, instance and layer normalization layers (`megengine.module.normalization`).

GroupNorm/InstanceNorm normalize each sample's channel groups over their spatial
positions (biased variance), then apply the per-channel affine weight/bias (C,); they
are composed of reductions and elementwise ops, so they trace, compile and dump.
"""
from __future__ import annotations

import numpy as np

from .. import functional as F
from ..core.tensor import amp as _amp
from ..tensor import Parameter
from .init import ones_, zeros_
from .module import Module


def _affine_params(module: Module, shape) -> None:
    if module.affine:
        module.weight = Parameter(np.ones(shape, np.float32))
        module.bias = Parameter(np.zeros(shape, np.float32))
    else:
        module.weight = module.bias = None


def _group_normalize(x, groups: int, eps: float):
    """(N, C, *S) normalized within each of `groups` channel groups per sample."""
    shape = tuple(x.shape)
    g = F.reshape(x, (shape[0], groups, -1))
    mean = F.mean(g, axis=2, keepdims=True)
    centered = F.sub(g, mean)
    var = F.mean(F.mul(centered, centered), axis=2, keepdims=True)
    return F.reshape(F.div(centered, F.sqrt(F.add(var, float(eps)))), shape)


def _channel_affine(y, weight, bias):
    view = (1, -1) + (1,) * (y.ndim - 2)
    return F.add(F.mul(y, F.reshape(weight, view)), F.reshape(bias, view))


class GroupNorm(Module):
    """Normalizes (N, C, ...) over groups of C / num_groups channels."""

    _flat_state = True

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, **kwargs):
        super().__init__(**kwargs)
        if num_channels % num_groups != 0:
            raise AssertionError(f"num_channels ({num_channels}) must be divisible by "
                                 f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, \
            eps, affine
        _affine_params(self, (num_channels,))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            ones_(self.weight)
            zeros_(self.bias)

    def forward(self, x):
        if _amp._autocast:     # MegEngine's GroupNorm runs in the high precision under amp
            x = x.astype(_amp._high_prec_dtype)
        y = _group_normalize(x, self.num_groups, self.eps)
        return _channel_affine(y, self.weight, self.bias) if self.affine else y

    def _module_info_string(self) -> str:
        return (f"groups={self.num_groups}, channels={self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}")


class InstanceNorm(Module):
    """Normalizes each channel of each sample over its spatial positions."""

    _flat_state = True

    def __init__(self, num_channels: int, eps: float = 1e-5, affine: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.num_channels, self.eps, self.affine = num_channels, eps, affine
        _affine_params(self, (num_channels,))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            ones_(self.weight)
            zeros_(self.bias)

    def forward(self, x):
        y = _group_normalize(x, x.shape[1], self.eps)
        return _channel_affine(y, self.weight, self.bias) if self.affine else y

    def _module_info_string(self) -> str:
        return f"channels={self.num_channels}, eps={self.eps}, affine={self.affine}"


class LayerNorm(Module):
    """Normalizes the trailing `normalized_shape` axes; weight ones, bias zeros."""

    _flat_state = True

    def __init__(self, normalized_shape, eps: float = 1e-5, affine: bool = True, **kwargs):
        super().__init__(**kwargs)
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps, self.affine = tuple(normalized_shape), eps, affine
        _affine_params(self, self.normalized_shape)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            ones_(self.weight)
            zeros_(self.bias)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.affine, self.weight, self.bias,
                            self.eps)

    def _module_info_string(self) -> str:
        return (f"normalized_shape={self.normalized_shape}, eps={self.eps}, "
                f"affine={self.affine}")
