"""MegEngine's module path `megengine.jit.graph_opt_config` (the class is in jit/configs.py)."""
from .configs import GraphOptimizationConfig

__all__ = ["GraphOptimizationConfig"]
