"""`megtrace.module.qat`: quantization-aware-training versions of the float modules
(fake-quantized weights and activations), as MegEngine's megengine.module.qat."""
from .batch_matmul_activation import BatchMatMulActivation
from .conv import Conv2d, ConvRelu2d, ConvTranspose2d, ConvTransposeRelu2d
from .conv_bn import ConvBn2d, ConvBnRelu2d, ConvTransposeBn2d, ConvTransposeBnRelu2d
from .layers import Concat, DequantStub, Elemwise, Linear, LinearRelu, QuantStub
from .linear_bn import LinearBn1d, LinearBnRelu1d
from .module import QATModule

__all__ = ["BatchMatMulActivation", "Concat", "Conv2d", "ConvBn2d", "ConvBnRelu2d", "ConvRelu2d", "ConvTranspose2d",
           "ConvTransposeBn2d", "ConvTransposeBnRelu2d", "ConvTransposeRelu2d",
           "DequantStub", "Elemwise", "Linear", "LinearBn1d", "LinearBnRelu1d",
           "LinearRelu", "QATModule", "QuantStub"]

# MegEngine's module paths of their own (`megengine.module.qat.linear`, ...)
from . import concat, conv_transpose_bn, elemwise, linear, quant_dequant  # noqa: E402,F401
