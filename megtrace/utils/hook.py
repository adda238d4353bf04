"""MegEngine's module path `megengine.utils.hook` (the class is in module/hooks.py)."""
from ..module.hooks import HookHandler

__all__ = ["HookHandler"]
