"""Automatic mixed precision state (MegEngine's `megengine.core.tensor.amp`).

Two switches, as in MegEngine: `_enabled` (read by functional code that casts biases and
normalization parameters) and the dtype-autocast flag (read by the operator dispatch, which
casts the inputs of convolutions, matrix products, normalizations and some elementwise
ops; `megtrace.amp._rules`). `megtrace.amp.enabled = True` sets both, as does `autocast`.
"""
from __future__ import annotations

import sys
import types
from typing import Callable, Optional

import numpy as np

from ... import dtype as _dt

_enabled = False
_autocast = False
_high_prec_dtype = "float32"
_low_prec_dtype = "float16"

# set by megtrace.amp (which knows the rules) so that this module needs no dispatch import:
# called with the new flag whenever the dtype-autocast flag changes
_on_autocast_change: Optional[Callable[[bool], None]] = None

__all__ = ["enabled", "high_prec_dtype", "low_prec_dtype"]


def _float_dtype_name(dtype) -> str:
    name = _dt.canonical(dtype)
    if np.dtype(name).kind != "f":
        raise ValueError(f"amp: the precision dtypes must be floating point; got {dtype!r}")
    return name


def _set_amp_dtype_autocast(enabled: bool) -> None:
    global _autocast
    _autocast = bool(enabled)
    if _on_autocast_change is not None:
        _on_autocast_change(_autocast)


def _get_amp_dtype_autocast() -> bool:
    return _autocast


def _set_amp_high_prec_dtype(dtype) -> None:
    global _high_prec_dtype
    _high_prec_dtype = _float_dtype_name(dtype)


def _get_amp_high_prec_dtype() -> str:
    return _high_prec_dtype


def _set_amp_low_prec_dtype(dtype) -> None:
    global _low_prec_dtype
    _low_prec_dtype = _float_dtype_name(dtype)


def _get_amp_low_prec_dtype() -> str:
    return _low_prec_dtype


def cast_tensors(*args, promote: bool = False) -> tuple:
    """The tensors converted to the low precision dtype (the high one with `promote`);
    None stays None (MegEngine's `core.tensor.utils.cast_tensors`)."""
    dtype = _high_prec_dtype if promote else _low_prec_dtype
    return tuple(a.astype(dtype) if a is not None else None for a in args)


class _AmpModule(types.ModuleType):
    """Module properties: `amp.enabled`, `amp.high_prec_dtype`, `amp.low_prec_dtype`."""

    @property
    def enabled(self) -> bool:
        return _enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        global _enabled
        _enabled = bool(value)
        _set_amp_dtype_autocast(_enabled)

    @property
    def high_prec_dtype(self) -> str:
        return _high_prec_dtype

    @high_prec_dtype.setter
    def high_prec_dtype(self, dtype) -> None:
        _set_amp_high_prec_dtype(dtype)

    @property
    def low_prec_dtype(self) -> str:
        return _low_prec_dtype

    @low_prec_dtype.setter
    def low_prec_dtype(self, dtype) -> None:
        _set_amp_low_prec_dtype(dtype)


sys.modules[__name__].__class__ = _AmpModule


def low_prec_bias(bias):
    """A bias about to be added to a low precision result: cast to the low dtype while
    amp is enabled (MegEngine's conv2d/linear do), else unchanged."""
    if _enabled and bias is not None and hasattr(bias, "astype"):
        return bias.astype(_low_prec_dtype)
    return bias
