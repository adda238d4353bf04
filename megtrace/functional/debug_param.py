"""MegEngine's `functional.debug_param`: how convolution and matmul algorithms are chosen.

The strategy is kept in `megtrace.config` (`benchmark_kernel` for PROFILE,
`deterministic_kernel` for REPRODUCIBLE), as MegEngine keeps it; megtrace's compiled
kernels are deterministic and chosen by its CPU rules or by `megtrace tune`, so the setting
changes what is reported, not which kernel runs.
"""
from __future__ import annotations

import enum
import warnings
from typing import Union

from .. import config as _config

__all__ = ["get_execution_strategy", "set_execution_strategy", "get_conv_execution_strategy",
           "set_conv_execution_strategy"]


class Strategy(enum.Flag):
    """MegEngine's Convolution.Strategy bits."""

    HEURISTIC = 1
    PROFILE = 2
    REPRODUCIBLE = 4
    OPTIMIZED = 8


_VALID = {"REPRODUCIBLE": Strategy.REPRODUCIBLE, "HEURISTIC": Strategy.HEURISTIC,
          "PROFILE": Strategy.PROFILE}


def get_execution_strategy() -> Strategy:
    """PROFILE or HEURISTIC, with REPRODUCIBLE when deterministic kernels are asked for."""
    strategy = Strategy.PROFILE if _config.benchmark_kernel else Strategy.HEURISTIC
    return strategy | Strategy.REPRODUCIBLE if _config.deterministic_kernel else strategy


def set_execution_strategy(option: Union[str, Strategy]) -> None:
    """`option`: a Strategy, or "HEURISTIC", "PROFILE", "REPRODUCIBLE" joined by '_'
    (e.g. "PROFILE_REPRODUCIBLE")."""
    if isinstance(option, Strategy):
        _config.benchmark_kernel = bool(option & Strategy.PROFILE)
        _config.deterministic_kernel = bool(option & Strategy.REPRODUCIBLE)
        return
    assert isinstance(option, str)
    benchmark = deterministic = False
    for opt in option.split("_"):
        if opt not in _VALID:
            raise ValueError(f"Valid option can only be one of {_VALID.keys()}, or combine "
                             "them with '_'.")
        benchmark |= _VALID[opt] is Strategy.PROFILE
        deterministic |= _VALID[opt] is Strategy.REPRODUCIBLE
    _config.benchmark_kernel, _config.deterministic_kernel = benchmark, deterministic


def get_conv_execution_strategy() -> Strategy:
    """Deprecated since MegEngine 1.3: get_execution_strategy()."""
    warnings.warn("get_conv_execution_strategy is deprecated since 1.3: use "
                  "get_execution_strategy() instead", DeprecationWarning, stacklevel=2)
    return get_execution_strategy()


def set_conv_execution_strategy(option: Union[str, Strategy]) -> None:
    """Deprecated since MegEngine 1.3: set_execution_strategy()."""
    warnings.warn("set_conv_execution_strategy is deprecated since 1.3: use "
                  "set_execution_strategy() instead", DeprecationWarning, stacklevel=2)
    set_execution_strategy(option)
