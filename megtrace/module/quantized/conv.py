"""Converted convolutions (Conv2d, ConvRelu2d, ConvBn2d, ConvBnRelu2d, ConvTranspose2d,
ConvTransposeRelu2d, ConvTransposeBn2d, ConvTransposeBnRelu2d): int8 weights, float
biases (qint32 at run time: scale = input scale * weight scale), BN folded."""
from __future__ import annotations

import numpy as np

from ...core.tensor import dtype as qdtype
from ...functional.nn import pad
from ...functional.quantized import conv_bias_activation, conv_transpose2d
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

    def calc_conv_quantized(self, inp, nonlinear_mode="identity"):
        """ConvBias on the int8 input and weight, the bias as qint32 (scale = input scale
        * weight scale); reflect/replicate padding pads the quantized input first."""
        assert self.padding_mode in ["zeros", "reflect", "replicate"]
        bias_scale = qdtype.get_scale(inp.dtype) * qdtype.get_scale(self.weight.dtype)
        padding = self.padding
        if self.padding_mode != "zeros":
            inp, padding = pad(inp, self.get_pad_witdth(), self.padding_mode), 0
        return conv_bias_activation(
            inp, self.weight, self.bias.astype(qdtype.qint32(bias_scale)), self.output_dtype,
            self.stride, padding, self.dilation, self.groups, conv_mode=self.conv_mode,
            compute_mode=self.compute_mode, nonlinear_mode=nonlinear_mode)

    def forward(self, inp):
        return self.calc_conv_quantized(inp, nonlinear_mode="identity")

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
    def forward(self, inp):
        return self.calc_conv_quantized(inp, nonlinear_mode="relu")


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
    def forward(self, inp):
        return self.calc_conv_quantized(inp, nonlinear_mode="relu")


class ConvTranspose2d(Float.ConvTranspose2d, QuantizedModule):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, dilation=1, groups=1, bias=True,
                 conv_mode="cross_correlation", compute_mode="default", dtype=None, **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, dilation, groups, bias, conv_mode, compute_mode,
                         **kwargs)
        self.output_dtype = dtype
        self.weight_dtype = None

    def calc_conv_transpose2d_quantized(self, inp, nonlinear_mode):
        assert nonlinear_mode == "identity", "nonlinear_mode shoule be 'identity'"
        bias = None
        if self.bias is not None:
            bias_scale = qdtype.get_scale(inp.dtype) * qdtype.get_scale(self.weight.dtype)
            bias = self.bias.astype(qdtype.qint32(bias_scale))
        return conv_transpose2d(
            inp=inp, weight=self.weight, bias=bias, dtype=self.output_dtype,
            stride=self.stride, padding=self.padding, output_padding=self.output_padding,
            dilation=self.dilation, groups=self.groups, conv_mode=self.conv_mode,
            compute_mode=self.compute_mode)

    def forward(self, inp):
        return self.calc_conv_transpose2d_quantized(inp, nonlinear_mode="identity")

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
    def forward(self, inp):
        return self.calc_conv_transpose2d_quantized(inp, nonlinear_mode="relu")


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
    def forward(self, inp):
        return self.calc_conv_transpose2d_quantized(inp, nonlinear_mode="relu")
