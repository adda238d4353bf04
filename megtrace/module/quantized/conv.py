"""Converted convolutions (Conv2d, ConvRelu2d, ConvBn2d, ConvBnRelu2d, ConvTranspose2d,
ConvTransposeRelu2d, ConvTransposeBn2d, ConvTransposeBnRelu2d): int8 weights, float
biases (qint32 at run time: scale = input scale * weight scale), BN folded."""
from __future__ import annotations

import numpy as np

from ...tensor import Parameter
from .. import conv as Float
from .module import QuantizedModule, quantized_weight


class Conv2d(Float.Conv2d, QuantizedModule):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, conv_mode="cross_correlation",
                 compute_mode="default", dtype=None, padding_mode="zeros", **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, True, conv_mode, compute_mode, padding_mode, **kwargs)
        self.output_dtype = dtype
        self.weight_dtype = None

    forward = QuantizedModule.forward

    @classmethod
    def _new(cls, conv, qat_module):
        return cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                   conv.padding, conv.dilation, conv.groups,
                   dtype=qat_module.get_activation_dtype(), padding_mode=conv.padding_mode,
                   name=qat_module.name)

    @classmethod
    def from_qat_module(cls, qat_module):
        qconv = cls._new(qat_module, qat_module)
        qconv.weight_dtype = qat_module.get_weight_dtype()
        qconv.weight = quantized_weight(qat_module.weight.numpy(), qconv.weight_dtype,
                                        qat_module.weight.name)
        if qat_module.bias is not None:
            qconv.bias = Parameter(qat_module.bias.numpy())
            qconv.bias.name = qat_module.bias.name
        else:
            qconv.bias = Parameter(np.zeros(qat_module._infer_bias_shape(), np.float32))
        return qconv


class ConvRelu2d(Conv2d):
    pass


class _ConvBnActivation2d(Conv2d):
    @classmethod
    def from_qat_module(cls, qat_module):
        qconv = cls._new(qat_module.conv, qat_module)
        w_fold, b_fold = qat_module.fold_weight_bias(qat_module.bn.running_mean,
                                                     qat_module.bn.running_var)
        qconv.weight_dtype = qat_module.get_weight_dtype()
        qconv.weight = quantized_weight(w_fold.numpy(), qconv.weight_dtype,
                                        qat_module.conv.weight.name)
        qconv.bias = Parameter(b_fold.numpy())
        if qat_module.conv.bias is not None:
            qconv.bias.name = qat_module.conv.bias.name
        return qconv


class ConvBn2d(_ConvBnActivation2d):
    pass


class ConvBnRelu2d(_ConvBnActivation2d):
    pass


class ConvTranspose2d(Float.ConvTranspose2d, QuantizedModule):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, dilation=1, groups=1, bias=True,
                 conv_mode="cross_correlation", compute_mode="default", dtype=None, **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, dilation, groups, bias, conv_mode, compute_mode,
                         **kwargs)
        self.output_dtype = dtype
        self.weight_dtype = None

    forward = QuantizedModule.forward

    @classmethod
    def from_qat_module(cls, qat_module):
        m = qat_module
        qct = cls(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding,
                  m.output_padding, m.dilation, m.groups, m.bias is not None, m.conv_mode,
                  m.compute_mode, dtype=m.get_activation_dtype(), name=m.name)
        qct.weight_dtype = m.get_weight_dtype()
        qct.weight = quantized_weight(m.weight.numpy(), qct.weight_dtype, m.weight.name)
        if m.bias is not None:
            qct.bias = Parameter(m.bias.numpy())
            qct.bias.name = m.bias.name
        return qct


class ConvTransposeRelu2d(ConvTranspose2d):
    pass


class _ConvTransposeBnActivation2d(ConvTranspose2d):
    @classmethod
    def from_qat_module(cls, qat_module):
        c = qat_module.conv_transpose2d
        qct = cls(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding,
                  c.output_padding, c.dilation, c.groups, True, c.conv_mode, c.compute_mode,
                  dtype=qat_module.get_activation_dtype(), name=qat_module.name)
        w_fold, b_fold = qat_module.fold_weight_bias(qat_module.bn.running_mean,
                                                     qat_module.bn.running_var)
        qct.weight_dtype = qat_module.get_weight_dtype()
        qct.weight = quantized_weight(w_fold.numpy(), qct.weight_dtype, c.weight.name)
        qct.bias = Parameter(b_fold.numpy())
        if c.bias is not None:
            qct.bias.name = c.bias.name
        return qct


class ConvTransposeBn2d(_ConvTransposeBnActivation2d):
    pass


class ConvTransposeBnRelu2d(_ConvTransposeBnActivation2d):
    pass
