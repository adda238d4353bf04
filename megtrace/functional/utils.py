"""MegEngine's module path `megengine.functional.utils` (the function is in accuracy.py)."""
from .accuracy import topk_accuracy

__all__ = ["topk_accuracy"]
