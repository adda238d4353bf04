"""`megtrace.module.quantized`: the converted (inference) modules `quantize` builds from
QAT modules. They run eagerly on quantized dtypes (see module.py)."""
from .batch_matmul_activation import BatchMatMulActivation
from .conv import (Conv2d, ConvBn2d, ConvBnRelu2d, ConvRelu2d, ConvTranspose2d,
                   ConvTransposeBn2d, ConvTransposeBnRelu2d, ConvTransposeRelu2d)
from .layers import (Concat, DequantStub, Elemwise, Linear, LinearBn1d, LinearBnRelu1d,
                     LinearRelu, QuantStub)
from .module import QuantizedModule

__all__ = ["BatchMatMulActivation", "Concat", "Conv2d", "ConvBn2d", "ConvBnRelu2d", "ConvRelu2d", "ConvTranspose2d",
           "ConvTransposeBn2d", "ConvTransposeBnRelu2d", "ConvTransposeRelu2d",
           "DequantStub", "Elemwise", "Linear", "LinearBn1d", "LinearBnRelu1d",
           "LinearRelu", "QuantStub", "QuantizedModule"]

# MegEngine's module paths of their own (`megengine.module.quantized.linear`, ...)
from . import (concat, conv_bn, conv_transpose_bn, elemwise, linear, linear_bn,  # noqa: E402,F401
               quant_dequant)
