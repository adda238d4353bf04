"""MegEngine's module path `megengine.jit.dtr_config` (the class is in jit/configs.py)."""
from .configs import DTRConfig

__all__ = ["DTRConfig"]
