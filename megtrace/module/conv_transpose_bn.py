"""MegEngine's module path `megengine.module.conv_transpose_bn` (the classes are in conv_bn.py)."""
from .conv_bn import ConvTransposeBn2d, ConvTransposeBnRelu2d

__all__ = ["ConvTransposeBn2d", "ConvTransposeBnRelu2d"]
