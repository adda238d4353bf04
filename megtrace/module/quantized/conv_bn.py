"""MegEngine's module path `megengine.module.quantized.conv_bn` (the classes are in quantized/conv.py)."""
from .conv import ConvBn2d, ConvBnRelu2d

__all__ = ["ConvBn2d", "ConvBnRelu2d"]
