"""MegEngine's module path `megengine.module.dropout` (the class is in activation.py)."""
from .activation import Dropout

__all__ = ["Dropout"]
