"""MegEngine's module path `megengine.module.padding` (the class is in image_layers.py)."""
from .image_layers import Pad

__all__ = ["Pad"]
