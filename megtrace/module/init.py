"""`megtrace.module.init`: MegEngine's in-place parameter initializers.

Random initializers draw from NumPy's global generator (seed it with np.random.seed for
reproducible weights). Fan computations follow MegEngine's weight layouts: grouped
convolution weights (G, OC/G, IC/G, ...) count one group's channels.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import numpy as np

from ..tensor import Tensor

__all__ = ["fill_", "zeros_", "ones_", "uniform_", "normal_", "calculate_gain",
           "calculate_fan_in_and_fan_out", "calculate_correct_fan", "xavier_uniform_",
           "xavier_normal_", "msra_uniform_", "msra_normal_"]


def _assign(tensor: Tensor, value: np.ndarray) -> None:
    tensor._set_value(np.asarray(value).astype(tensor.dtype, copy=False))


def fill_(tensor: Tensor, val: Union[float, int]) -> None:
    """Fill `tensor` with `val`."""
    _assign(tensor, np.full(tensor.shape, val))


def zeros_(tensor: Tensor) -> None:
    fill_(tensor, 0)


def ones_(tensor: Tensor) -> None:
    fill_(tensor, 1)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> None:
    """Fill with samples of U(a, b)."""
    _assign(tensor, np.random.uniform(a, b, size=tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> None:
    """Fill with samples of N(mean, std^2)."""
    _assign(tensor, np.random.normal(mean, std, size=tensor.shape))


_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
               "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: Optional[Union[int, float]] = None) -> float:
    """The recommended gain for `nonlinearity` (1 for linear/conv/sigmoid, 5/3 for tanh,
    sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu)."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, float) or (isinstance(param, int) and not isinstance(param, bool)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def calculate_fan_in_and_fan_out(tensor: Tensor) -> Tuple[float, float]:
    """(fan_in, fan_out) of a weight: Linear (out, in); convolution (OC, IC, *kernel);
    a 5-d or larger weight is read as grouped, (G, OC/G, IC/G, *kernel), per group."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError("fan_in and fan_out can not be computed for tensor with fewer "
                         "than 2 dimensions")
    if len(shape) == 2:
        return shape[1], shape[0]
    if len(shape) >= 5:
        shape = shape[1:]
    receptive = int(np.prod(shape[2:], dtype=np.int64))
    return shape[1] * receptive, shape[0] * receptive


def calculate_correct_fan(tensor: Tensor, mode: str) -> float:
    """fan_in or fan_out of `tensor`, as `mode` says."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of "
                         f"{['fan_in', 'fan_out']}")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> None:
    """Glorot: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    uniform_(tensor, -a, a)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> None:
    """Glorot: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def msra_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                  nonlinearity: str = "leaky_relu") -> None:
    """He: U(-bound, bound) with bound = sqrt(3) * gain / sqrt(fan)."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    uniform_(tensor, -bound, bound)


def msra_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                 nonlinearity: str = "leaky_relu") -> None:
    """He: N(0, std^2) with std = gain / sqrt(fan)."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(calculate_correct_fan(tensor, mode))
    normal_(tensor, 0, std)
