"""MegEngine's module path `megengine.jit.sublinear_memory_config` (the class is in
jit/configs.py)."""
from .configs import SublinearMemoryConfig

__all__ = ["SublinearMemoryConfig"]
