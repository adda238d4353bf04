"""MegEngine's module path `megengine.module.lrn` (the class is in normalization.py)."""
from .normalization import LocalResponseNorm

__all__ = ["LocalResponseNorm"]
