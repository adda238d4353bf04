"""QAT convolutions: Conv2d, ConvRelu2d, ConvTranspose2d, ConvTransposeRelu2d."""
from __future__ import annotations

from ... import functional as F
from .. import conv as Float
from .module import QATModule


class Conv2d(Float.Conv2d, QATModule):
    """Conv2d with fake-quantized weight, bias (qint32) and result."""

    def calc_conv_qat(self, inp):
        w_qat = self.apply_quant_weight(self.weight)
        b_qat = self.apply_quant_bias(self.bias, inp, w_qat)
        return self.calc_conv(inp, w_qat, b_qat)

    @classmethod
    def from_float_module(cls, float_module: Float.Conv2d):
        m = float_module
        qat_module = cls(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding,
                         m.dilation, m.groups, m.bias is not None, m.conv_mode,
                         m.compute_mode, m.padding_mode, name=m.name)
        qat_module.weight = m.weight
        qat_module.bias = m.bias
        return qat_module

    def forward(self, inp):
        return self.apply_quant_activation(self.calc_conv_qat(inp))


class ConvRelu2d(Conv2d):
    def forward(self, inp):
        return self.apply_quant_activation(F.relu(self.calc_conv_qat(inp)))


class ConvTranspose2d(Float.ConvTranspose2d, QATModule):
    """ConvTranspose2d with fake-quantized weight, bias (qint32) and result."""

    def calc_conv_transpose2d_qat(self, inp):
        w_qat = self.apply_quant_weight(self.weight)
        b_qat = self.apply_quant_bias(self.bias, inp, w_qat)
        return self.calc_conv_transpose2d(inp, w_qat, b_qat)

    @classmethod
    def from_float_module(cls, float_module: Float.ConvTranspose2d):
        m = float_module
        qat_module = cls(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding,
                         m.output_padding, m.dilation, m.groups, m.bias is not None,
                         m.conv_mode, m.compute_mode, name=m.name)
        qat_module.weight = m.weight
        qat_module.bias = m.bias
        return qat_module

    def forward(self, inp):
        return self.apply_quant_activation(self.calc_conv_transpose2d_qat(inp))


class ConvTransposeRelu2d(ConvTranspose2d):
    def forward(self, inp):
        return self.apply_quant_activation(F.relu(self.calc_conv_transpose2d_qat(inp)))
