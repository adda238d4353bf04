"""MegEngine's module path `megengine.module.embedding` (the class is in activation.py)."""
from .activation import Embedding

__all__ = ["Embedding"]
