"""Fusing Conv/ConvTranspose/Linear with a following BatchNorm and ReLU into one module
(MegEngine's megengine.utils.bn_fusion): in eval mode the BatchNorm's statistics and affine
parameters are folded into the weight and bias; in training mode the fused module keeps a
copy of the BatchNorm (ConvBn2d, LinearBn1d, ...)."""
from __future__ import annotations

from copy import deepcopy

from ..functional import ones, sqrt, zeros
from ..module import (BatchNorm1d, BatchNorm2d, Conv2d, ConvBn2d, ConvBnRelu2d, ConvRelu2d,
                      ConvTranspose2d, ConvTransposeBn2d, ConvTransposeBnRelu2d,
                      ConvTransposeRelu2d, Linear, LinearBn1d, LinearBnRelu1d, LinearRelu, ReLU)
from ..tensor import Parameter, Tensor

__all__ = ["fold_weight_bias", "fuse_conv_bn_relu_module", "fuse_linear_bn_relu_module"]

# (types present..., training when a BatchNorm is present) -> the fused module
_FUSED = {
    (Conv2d, BatchNorm2d, ReLU, False): ConvRelu2d,
    (Conv2d, BatchNorm2d, ReLU, True): ConvBnRelu2d,
    (Conv2d, BatchNorm2d, False): Conv2d,
    (Conv2d, BatchNorm2d, True): ConvBn2d,
    (Conv2d, ReLU): ConvRelu2d,
    (ConvTranspose2d, BatchNorm2d, ReLU, False): ConvTransposeRelu2d,
    (ConvTranspose2d, BatchNorm2d, ReLU, True): ConvTransposeBnRelu2d,
    (ConvTranspose2d, BatchNorm2d, False): ConvTranspose2d,
    (ConvTranspose2d, BatchNorm2d, True): ConvTransposeBn2d,
    (ConvTranspose2d, ReLU): ConvTransposeRelu2d,
    (Linear, BatchNorm1d, ReLU, False): LinearRelu,
    (Linear, BatchNorm1d, ReLU, True): LinearBnRelu1d,
    (Linear, BatchNorm1d, False): Linear,
    (Linear, BatchNorm1d, True): LinearBn1d,
    (Linear, ReLU): LinearRelu,
}


def _or(value, default):
    return default if value is None else value


def _fold_conv(weight, bias, gamma, beta, mean, var, eps, transpose):
    # channels of the output: dim 0 of a conv weight (OC, IC, ..), dim 1 of a transposed
    # one (IC, OC, ..); a grouped weight has the group count in front
    grouped = weight.ndim == 5
    groups = weight.shape[0] if grouped else 1
    per_group = weight.shape[(2 if transpose else 1) if grouped else (1 if transpose else 0)]
    channels = groups * per_group
    gamma = _or(gamma, ones((channels,), dtype="float32")).reshape(1, -1, 1, 1)
    beta = _or(beta, zeros((channels,), dtype="float32")).reshape(1, -1, 1, 1)
    mean = _or(mean, zeros((1, channels, 1, 1), dtype="float32"))
    var = _or(var, ones((1, channels, 1, 1), dtype="float32"))
    bias = _or(bias, zeros((1, channels, 1, 1), dtype="float32"))
    istd = 1.0 / sqrt(var + eps)
    factor = gamma * istd
    shape = (1, -1, 1, 1) if transpose else (-1, 1, 1, 1)
    w_fold = weight * (factor.reshape(groups, *shape) if grouped else factor.reshape(*shape))
    return w_fold, beta + gamma * (bias - mean) * istd


def _fold_linear(weight, bias, gamma, beta, mean, var, eps):
    features = weight.shape[0]
    flat = (lambda t, fill: fill((features,), dtype="float32") if t is None else t.reshape(-1))
    gamma, beta = flat(gamma, ones), flat(beta, zeros)
    mean, var, bias = flat(mean, zeros), flat(var, ones), flat(bias, zeros)
    istd = 1.0 / sqrt(var + eps)
    factor = gamma * istd
    return weight * factor.reshape(-1, *([1] * (weight.ndim - 1))), \
        beta + gamma * (bias - mean) * istd


def fold_weight_bias(weight: Tensor, bias, gamma, beta, bn_mean, bn_var, eps: float = 1e-5,
                     transpose: bool = False):
    """The weight and bias of a conv (4-d/5-d weight; `transpose` for ConvTranspose2d) or a
    linear layer (2-d weight) followed by BatchNorm with these parameters and statistics
    (None: the BatchNorm's defaults)."""
    if weight.ndim != 2:
        return _fold_conv(weight, bias, gamma, beta, bn_mean, bn_var, eps, transpose)
    return _fold_linear(weight, bias, gamma, beta, bn_mean, bn_var, eps)


def _key(layer, bn, relu) -> tuple:
    key = tuple(type(m) for m in (layer, bn, relu) if m)
    if bn:
        key += (layer.training,)
    if key not in _FUSED:
        raise ValueError(f"cannot fuse {[type(m).__name__ for m in (layer, bn, relu) if m]}")
    return key


def _finish(module, inner, layer, bn, weight, bias):
    inner.weight = Parameter(weight)
    if bias is not None:
        inner.bias = Parameter(bias)
    if bn is not None and layer.training:
        module.bn = deepcopy(bn)
    inner.training = layer.training
    return module


def fuse_conv_bn_relu_module(conv: Conv2d, bn: BatchNorm2d | None, relu: ReLU | None):
    """One module computing relu(bn(conv(x))) (bn, relu optional): Conv2d or
    ConvTranspose2d, folded in eval mode, ConvBn2d-like with a BatchNorm copy in training."""
    if bn:
        assert conv.training == bn.training, \
            "Conv and BN both must be in the same mode (train or eval)."
        assert bn.num_features == conv.out_channels, \
            "Output channel of Conv2d must match num_features of BatchNorm2d"
    module = _FUSED[_key(conv, bn, relu)](
        in_channels=conv.in_channels, out_channels=conv.out_channels,
        kernel_size=conv.kernel_size, stride=conv.stride, padding=conv.padding,
        dilation=conv.dilation, groups=conv.groups, bias=conv.bias is not None,
        conv_mode=conv.conv_mode, compute_mode=conv.compute_mode, name=conv.name)
    transpose = isinstance(conv, ConvTranspose2d)
    if transpose:
        module.output_padding = conv.output_padding
    separate = bn is not None and conv.training
    inner = (module.conv_transpose2d if transpose else module.conv) if separate else module
    weight, bias = conv.weight, conv.bias
    if bn is not None and not conv.training:
        weight, bias = fold_weight_bias(weight, bias, bn.weight, bn.bias, bn.running_mean,
                                        bn.running_var, bn.eps, transpose=transpose)
    return _finish(module, inner, conv, bn, weight, bias)


def fuse_linear_bn_relu_module(linear: Linear, bn: BatchNorm1d | None, relu: ReLU | None):
    """One module computing relu(bn(linear(x))) (bn, relu optional), as
    `fuse_conv_bn_relu_module` does for convolutions."""
    if bn:
        assert linear.training == bn.training, \
            "Linear and BN both must be in the same mode (train or eval)."
        assert bn.num_features == linear.out_features, \
            "Output channel of Linear must match num_features of BatchNorm1d"
    module = _FUSED[_key(linear, bn, relu)](
        in_features=linear.in_features, out_features=linear.out_features,
        bias=linear.bias is not None, compute_mode=linear.compute_mode, name=linear.name)
    inner = module.linear if bn is not None and linear.training else module
    weight, bias = linear.weight, linear.bias
    if bn is not None and not linear.training:
        weight, bias = fold_weight_bias(weight, bias, bn.weight, bn.bias, bn.running_mean,
                                        bn.running_var, bn.eps)
    return _finish(module, inner, linear, bn, weight, bias)
