"""MegEngine's module path `megengine.module.qat.elemwise` (the class is in qat/layers.py)."""
from .layers import Elemwise

__all__ = ["Elemwise"]
