"""MegEngine's module path `megengine.module.pooling` (the classes are in layers.py)."""
from .layers import AvgPool2d, MaxPool2d

__all__ = ["MaxPool2d", "AvgPool2d"]
