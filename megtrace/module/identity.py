"""MegEngine's module path `megengine.module.identity` (the class is in activation.py)."""
from .activation import Identity

__all__ = ["Identity"]
