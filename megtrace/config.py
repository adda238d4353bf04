"""`megtrace.config`: MegEngine's global execution settings (`megengine.config`).

`megtrace.core._config` is this module (MegEngine's `megengine.core._config`, which
`megengine.config` re-exports). `_compute_mode` ("default" or "float32") overrides the compute_mode argument of
convolutions and matrix products when it is not "default"; `_override(...)` sets
settings for a `with` block. The kernel-selection flags (benchmark_kernel,
deterministic_kernel) and async_level are kept for compatibility: megtrace's NumPy
kernels are deterministic and synchronous, and TVM picks its own schedules.
"""
from __future__ import annotations

import sys
import types
from contextlib import contextmanager
from typing import Optional

__all__ = ["benchmark_kernel", "benchmark_with_subprocess", "deterministic_kernel",
           "async_level", "disable_memory_forwarding", "_compute_mode",
           "_auto_format_convert", "_override"]

benchmark_kernel: bool = False
deterministic_kernel: bool = False
benchmark_with_subprocess: bool = False
disable_memory_forwarding: bool = False
# the setting itself, under MegEngine's module-level name: user code sets it directly
# (`from megengine.core import _config; _config.__compute_mode = "float32"`, as the model
# zoo's CLIP does); `_compute_mode` below reads and writes it
globals()["__compute_mode"] = "default"
_conv_format: str = "default"
_bn_format: str = "dim_1c11"
_auto_format_convert: bool = False
_async_level: int = 2


class _ConfigModule(types.ModuleType):
    """Validates `async_level` on assignment, as MegEngine's property does; `_compute_mode`
    is the module's `__compute_mode`."""

    @property
    def _compute_mode(self) -> str:
        return self.__dict__["__compute_mode"]

    @_compute_mode.setter
    def _compute_mode(self, mode: str) -> None:
        self.__dict__["__compute_mode"] = mode

    @property
    def async_level(self) -> int:
        return self._async_level

    @async_level.setter
    def async_level(self, level: int) -> None:
        if not 0 <= level <= 2:
            raise AssertionError("async_level should be 0, 1 or 2")
        self._async_level = level


sys.modules[__name__].__class__ = _ConfigModule


def _reset_execution_config(benchmark_kernel: Optional[bool] = None,
                            deterministic_kernel: Optional[bool] = None,
                            async_level: Optional[int] = None,
                            compute_mode: Optional[str] = None) -> tuple:
    """Set the given settings; returns the previous four, for restoring."""
    mod = sys.modules[__name__]
    previous = (mod.benchmark_kernel, mod.deterministic_kernel, mod.async_level,
                mod._compute_mode)
    if benchmark_kernel is not None:
        mod.benchmark_kernel = benchmark_kernel
    if deterministic_kernel is not None:
        mod.deterministic_kernel = deterministic_kernel
    if async_level is not None:
        mod.async_level = async_level
    if compute_mode is not None:
        mod._compute_mode = compute_mode
    return previous


@contextmanager
def _override(benchmark_kernel: Optional[bool] = None,
              deterministic_kernel: Optional[bool] = None,
              async_level: Optional[int] = None, compute_mode: Optional[str] = None):
    """Settings for the duration of a `with` block."""
    previous = _reset_execution_config(benchmark_kernel, deterministic_kernel, async_level,
                                       compute_mode)
    try:
        yield
    finally:
        _reset_execution_config(*previous)


def _get_actual_op_param(function_param, config_param):
    """The global setting wins unless it is "default"."""
    return function_param if config_param == "default" else config_param
