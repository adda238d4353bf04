"""MegEngine's module path `megengine.module.quantized.conv_transpose_bn` (the classes are in quantized/conv.py)."""
from .conv import ConvTransposeBn2d, ConvTransposeBnRelu2d

__all__ = ["ConvTransposeBn2d", "ConvTransposeBnRelu2d"]
