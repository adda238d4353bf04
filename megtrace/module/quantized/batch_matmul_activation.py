"""Quantized `BatchMatMulActivation`: MegEngine runs it as a BatchConvBias with 1x1
kernels (the input as a (batch, in_features, k, 1) image, each sample its own weight)."""
from __future__ import annotations

import numpy as np

from ...core.tensor import dtype as qdtype
from ...functional import expand_dims, squeeze
from ...functional.quantized import batch_conv_bias_activation
from ...tensor import Parameter
from .. import batch_matmul_activation as Float
from .module import QuantizedModule, quantized_weight


class BatchMatMulActivation(Float.BatchMatMulActivation, QuantizedModule):
    def __init__(self, batch: int, in_features: int, out_features: int, bias: bool = True,
                 nonlinear_mode="identity", dtype=None, **kwargs):
        super().__init__(batch, in_features, out_features, bias, nonlinear_mode, **kwargs)
        self.output_dtype = dtype

    def calc_bmm_quantized(self, inp):
        bias_scale = qdtype.get_scale(inp.dtype) * qdtype.get_scale(self.weight.dtype)
        res = batch_conv_bias_activation(
            expand_dims(inp, [-1]), self.weight, self.bias.astype(qdtype.qint32(bias_scale)),
            dtype=self.output_dtype, stride=1, padding=0, dilation=1, groups=1,
            nonlinear_mode=self.nonlinear_mode)
        return squeeze(res, -1)

    def forward(self, inp):
        return self.calc_bmm_quantized(inp)

    @classmethod
    def from_qat_module(cls, qat_module):
        """As MegEngine 1.13's: `nonlinear_mode` is not carried over (see the QAT one)."""
        m = qat_module
        qbmm = cls(m.batch, m.in_features, m.out_features, m.bias is not None,
                   dtype=m.get_activation_dtype(), name=m.name)
        weight = m.weight.numpy().reshape(m.weight.shape + (1, 1))
        qbmm.weight = quantized_weight(weight, m.get_weight_dtype(), m.weight.name)
        bias = m.bias.numpy().reshape(1, m.out_features, 1, 1) if m.bias is not None else \
            np.zeros((1, m.out_features, 1, 1), np.float32)
        qbmm.bias = Parameter(bias)
        if m.bias is not None:
            qbmm.bias.name = m.bias.name
        return qbmm
