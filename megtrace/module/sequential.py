"""MegEngine's module path `megengine.module.sequential` (the class is in layers.py)."""
from .layers import Sequential

__all__ = ["Sequential"]
