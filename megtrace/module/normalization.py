"""Group, instance, layer and general normalization layers and LocalResponseNorm
(`megengine.module.normalization`, `module.lrn`); each forwards to its F.nn functional.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import functional as F
from ..tensor import Parameter
from .init import ones_, zeros_
from .module import Module


class _AffineNorm(Module):
    """A normalization with an optional weight (ones) and bias (zeros) of one shape."""

    def _init_affine(self, shape) -> None:
        if self.affine:
            self.weight = Parameter(np.ones(shape, np.float32))
            self.bias = Parameter(np.zeros(shape, np.float32))
        else:
            self.weight = self.bias = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            ones_(self.weight)
            zeros_(self.bias)


class GroupNorm(_AffineNorm):
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
        self._init_affine((num_channels,))

    def forward(self, x):
        return F.nn.group_norm(x, self.num_groups, self.affine, self.weight, self.bias, self.eps)

    def _module_info_string(self) -> str:
        return (f"groups={self.num_groups}, channels={self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}")


class InstanceNorm(_AffineNorm):
    """Normalizes each channel of each sample over its spatial positions."""

    _flat_state = True

    def __init__(self, num_channels: int, eps: float = 1e-5, affine: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.num_channels, self.eps, self.affine = num_channels, eps, affine
        self._init_affine((num_channels,))

    def forward(self, x):
        return F.nn.instance_norm(x, self.affine, self.weight, self.bias, self.eps)

    def _module_info_string(self) -> str:
        return f"channels={self.num_channels}, eps={self.eps}, affine={self.affine}"


class LayerNorm(_AffineNorm):
    """Normalizes the trailing `normalized_shape` axes; weight ones, bias zeros."""

    _flat_state = True

    def __init__(self, normalized_shape, eps: float = 1e-5, affine: bool = True, **kwargs):
        super().__init__(**kwargs)
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps, self.affine = tuple(normalized_shape), eps, affine
        self._init_affine(self.normalized_shape)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.affine, self.weight, self.bias,
                            self.eps)

    def _module_info_string(self) -> str:
        return (f"normalized_shape={self.normalized_shape}, eps={self.eps}, "
                f"affine={self.affine}")


class GeneralNorm(_AffineNorm):
    """Normalizes over `normalized_axis` (ascending) with weight/bias of `normalized_shape`
    (saved unflattened: MegEngine's state_dict flattens only Batch/Group/Layer/InstanceNorm)."""

    def __init__(self, normalized_shape=None, normalized_axis=0, eps: float = 1e-5,
                 affine: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.eps, self.affine = eps, affine
        if affine:
            assert normalized_shape is not None, \
                "normalized_shape must be specified when affine is true"
            assert normalized_axis is not None, \
                "normalized_axis must be specified when affine is true"
            if not isinstance(normalized_axis, Sequence):
                normalized_axis = [normalized_axis]
            # MegEngine 1.13 accepts only a list/tuple normalized_shape here
            assert isinstance(normalized_shape, (list, tuple))
            assert len(normalized_axis) == len(normalized_shape), \
                "The size of normalized_axis and normalized_shape are different"
            assert len(set(normalized_axis)) == len(normalized_axis), \
                "there are duplicate axis in list normalized_axis"
        self._init_affine(normalized_shape)
        self.normalized_shape, self.normalized_axis = normalized_shape, normalized_axis

    def forward(self, x):
        axes = [a + x.ndim if a < 0 else a for a in self.normalized_axis]
        self.normalized_axis = axes
        assert axes == sorted(axes), (
            f"The order of normalized_axis is incorrect, should be {sorted(axes)}, but got "
            f"{axes}. Please specify the values of axis in the correct order in normalized_axis")
        shape = tuple(x.shape)
        for i, a in enumerate(axes):
            assert shape[a] == self.normalized_shape[i], (
                f"inp.shape={shape}, normalized_axis={axes}, normalized_shape="
                f"{self.normalized_shape}, inp.shape[normalized_axis[{i}]]({shape[a]}) != "
                f"normalized_shape[{i}]({self.normalized_shape[i]})")
        return F.nn.general_norm(x, axes, self.affine, self.weight, self.bias, self.eps)

    def _module_info_string(self) -> str:
        return (f"normalized_shape={self.normalized_shape}, normalized_axis="
                f"{self.normalized_axis}, eps={self.eps}, affine={self.affine}")


class LocalResponseNorm(Module):
    """F.nn.local_response_norm with fixed kernel_size, k, alpha and beta."""

    def __init__(self, kernel_size: int = 5, k: float = 2.0, alpha: float = 1e-4,
                 beta: float = 0.75, **kwargs):
        super().__init__(**kwargs)
        self.kernel_size, self.k, self.alpha, self.beta = kernel_size, k, alpha, beta

    def forward(self, inp):
        return F.nn.local_response_norm(inp, self.kernel_size, self.k, self.alpha, self.beta)
