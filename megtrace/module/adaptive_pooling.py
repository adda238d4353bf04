"""MegEngine's module path `megengine.module.adaptive_pooling` (the classes are in activation.py)."""
from .activation import AdaptiveAvgPool2d, AdaptiveMaxPool2d

__all__ = ["AdaptiveMaxPool2d", "AdaptiveAvgPool2d"]
