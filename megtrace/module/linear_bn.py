"""MegEngine's module path `megengine.module.linear_bn` (the classes are in conv_bn.py)."""
from .conv_bn import LinearBn1d, LinearBnRelu1d

__all__ = ["LinearBn1d", "LinearBnRelu1d"]
