"""Switches of trace_module's checks (MegEngine's tm_config)."""
from __future__ import annotations

_checks = {"expr": False, "default": True}


def enable_expr_checker() -> None:
    """Turn trace_module's check on even where disable_default_checker turned it off.
    (MegEngine compares every expr's result while tracing; megtrace compares the traced
    module's outputs, which replay the very calls the trace recorded.)"""
    _checks["expr"] = True


def disable_default_checker() -> None:
    """Do not compare the traced module's outputs with the original's after tracing."""
    _checks["default"] = False


def default_checker_enabled() -> bool:
    return _checks["default"] or _checks["expr"]
