"""MegEngine's module path `megengine.module.qat.linear` (the classes are in qat/layers.py)."""
from .layers import Linear, LinearRelu

__all__ = ["Linear", "LinearRelu"]
