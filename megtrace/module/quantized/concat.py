"""MegEngine's module path `megengine.module.quantized.concat` (the class is in quantized/layers.py)."""
from .layers import Concat

__all__ = ["Concat"]
