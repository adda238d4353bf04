"""MegEngine's `core._trace_option`: the process-wide symbolic-shape switch.

In megtrace it decides what a Network VarNode's `shape` is (a VarNode when on, a tuple
when off, megtrace.utils.network_node); a `trace` takes its own `symbolic_shape`
argument. Off by default, on when MEGENGINE_USE_SYMBOLIC_SHAPE is set, as in MegEngine.
"""
from __future__ import annotations

import os

_use_symbolic_shape = bool(os.environ.get("MEGENGINE_USE_SYMBOLIC_SHAPE"))


def use_symbolic_shape() -> bool:
    """Whether shapes are symbolic (VarNodes) rather than tuples."""
    return _use_symbolic_shape


def set_symbolic_shape(option: bool) -> bool:
    """Switch symbolic shapes on or off; returns the previous setting."""
    global _use_symbolic_shape
    old, _use_symbolic_shape = _use_symbolic_shape, bool(option)
    return old
