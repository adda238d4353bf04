"""MegEngine's module path `megengine.module.qat.concat` (the class is in qat/layers.py)."""
from .layers import Concat

__all__ = ["Concat"]
