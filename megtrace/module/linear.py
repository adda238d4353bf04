"""MegEngine's module path `megengine.module.linear` (the classes are in layers.py)."""
from .layers import Linear, LinearRelu

__all__ = ["Linear", "LinearRelu"]
