"""MegEngine's module path `megengine.module.pixel_shuffle` (the class is in image_layers.py)."""
from .image_layers import PixelShuffle

__all__ = ["PixelShuffle"]
