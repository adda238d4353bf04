"""MegEngine's module path `megengine.module.qat.conv_transpose_bn` (the classes are in qat/conv_bn.py)."""
from .conv_bn import ConvTransposeBn2d, ConvTransposeBnRelu2d

__all__ = ["ConvTransposeBn2d", "ConvTransposeBnRelu2d"]
