"""MegEngine's module path `megengine.module.quantized.elemwise` (the class is in quantized/layers.py)."""
from .layers import Elemwise

__all__ = ["Elemwise"]
