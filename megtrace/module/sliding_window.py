"""MegEngine's module path `megengine.module.sliding_window` (the classes are in image_layers.py)."""
from .image_layers import SlidingWindow, SlidingWindowTranspose

__all__ = ["SlidingWindow", "SlidingWindowTranspose"]
