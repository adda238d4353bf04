"""Reverse-mode automatic differentiation (MegEngine's megengine.autodiff)."""
from .function import Function
from .grad_manager import GradManager

__all__ = ["Function", "GradManager"]
