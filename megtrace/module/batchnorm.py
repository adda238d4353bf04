"""Batch normalization layers (MegEngine's _BatchNorm family): weight/bias and running
statistics are (1, C, 1, 1) tensors, saved flat by state_dict."""
from __future__ import annotations

import numpy as np

from .. import functional as F
from ..tensor import Parameter, Tensor
from . import init
from .module import Module


class _BatchNorm(Module):
    _flat_state = True

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.9,
                 affine: bool = True, track_running_stats: bool = True, freeze: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self._track_running_stats_saved = track_running_stats
        self.freeze = freeze
        if freeze and not track_running_stats:
            raise AssertionError("track_running_stats must be initilized to True if freeze "
                                 "is True")
        shape = (1, num_features, 1, 1)
        self.weight = Parameter(np.ones(shape, np.float32)) if affine else None
        self.bias = Parameter(np.zeros(shape, np.float32)) if affine else None
        if track_running_stats:
            self.running_mean = Tensor(np.zeros(shape, np.float32))
            self.running_var = Tensor(np.ones(shape, np.float32))
        else:
            self.running_mean = self.running_var = None

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_ndim(self, inp) -> None:
        raise NotImplementedError

    def forward(self, inp):
        self._check_input_ndim(inp)
        if not self._track_running_stats_saved and self.track_running_stats:
            raise AssertionError("track_running_stats can not be initilized to False and "
                                 "changed to True later")
        if self.freeze:       # frozen: an affine map from the running statistics, and
            # no gradient reaches weight and bias (MegEngine detaches them)
            weight = None if self.weight is None else self.weight.detach()
            bias = None if self.bias is None else self.bias.detach()
            scale = (self.running_var + self.eps) ** (-0.5)
            if weight is not None:
                scale = scale * weight
            shift = -self.running_mean * scale
            if bias is not None:
                shift = shift + bias
            return inp * _to_ndim(scale, inp.ndim) + _to_ndim(shift, inp.ndim)
        momentum = self.momentum if self.training and self.track_running_stats else 0.0
        tracked = self.track_running_stats
        return F.batch_norm(
            inp, self.running_mean if tracked else None, self.running_var if tracked else None,
            self.weight, self.bias,
            training=self.training or (self.running_mean is None and self.running_var is None),
            momentum=momentum, eps=self.eps)

    def _module_info_string(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


def _to_ndim(t, ndim: int):
    """(1, C, 1, 1) statistics shaped to broadcast against a `ndim`-d input."""
    if ndim == 4:
        return t
    return t.reshape((1, t.shape[1]) + (1,) * (ndim - 2))


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose statistics MegEngine reduces over a process `group`; megtrace runs
    in one process, so they are the batch's own. Takes 2-d, 3-d or 4-d inputs."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.9,
                 affine: bool = True, track_running_stats: bool = True, freeze: bool = False,
                 group=None, **kwargs):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, freeze,
                         **kwargs)
        from ..distributed import WORLD
        self.group = WORLD if group is None else group

    def _check_input_ndim(self, inp) -> None:
        if inp.ndim not in (2, 3, 4):
            raise ValueError(f"expected 2D, 3D or 4D input (got {inp.ndim}D input)")

    def forward(self, inp):
        self._check_input_ndim(inp)
        shape = inp.shape
        if len(shape) != 4:          # MegEngine pads the shape to (N, C, L, 1)
            inp = inp.reshape(tuple(shape) + (1,) * (4 - len(shape)))
        momentum = self.momentum if self.training and self.track_running_stats else 0.0
        out = F.sync_batch_norm(
            inp, self.running_mean, self.running_var, self.weight, self.bias,
            training=(self.training and not self.freeze)
            or (self.running_mean is None and self.running_var is None),
            momentum=momentum, eps=self.eps, group=self.group)
        return out if len(shape) == 4 else out.reshape(shape)


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) inputs."""

    def _check_input_ndim(self, inp) -> None:
        if inp.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {inp.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) inputs."""

    def _check_input_ndim(self, inp) -> None:
        if inp.ndim != 4:
            raise ValueError(f"expected 4D input (got {inp.ndim}D input)")
