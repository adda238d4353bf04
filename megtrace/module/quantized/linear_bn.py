"""MegEngine's module path `megengine.module.quantized.linear_bn` (the classes are in quantized/layers.py)."""
from .layers import LinearBn1d, LinearBnRelu1d

__all__ = ["LinearBn1d", "LinearBnRelu1d"]
