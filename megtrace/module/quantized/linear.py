"""MegEngine's module path `megengine.module.quantized.linear` (the classes are in quantized/layers.py)."""
from .layers import Linear, LinearRelu

__all__ = ["Linear", "LinearRelu"]
