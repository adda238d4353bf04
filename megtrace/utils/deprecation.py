"""MegEngine's deprecation helpers (`megengine.utils.deprecation`): aliases that warn once
per call site's use and point at the new name."""
from __future__ import annotations

import functools
import importlib
import warnings
from typing import Callable


def deprecated_func(version: str, origin: str, name: str, tbd: bool) -> Callable:
    """`origin.name` under an old name: calling it warns (DeprecationWarning, "use
    origin.name instead") unless `tbd` (to be discussed: no warning)."""
    func = getattr(importlib.import_module(origin), name)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not tbd:
            warnings.warn(f"Call to deprecated function {name}. (use {origin}.{name} instead) "
                          f"-- Deprecated since version {version}.", DeprecationWarning,
                          stacklevel=2)
        return func(*args, **kwargs)
    return wrapper


def deprecated_kwargs_default(version: str, kwargs_name: str, kwargs_pos: int) -> Callable:
    """Decorator: a PendingDeprecationWarning when `kwargs_name` (the `kwargs_pos`-th
    parameter) is left to its default, whose meaning changes in `version`."""
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if len(args) < kwargs_pos and kwargs_name not in kwargs:
                warnings.warn(f"the default behavior for {kwargs_name} will be changed in "
                              f"version {version}, please use it in keyword parameter way",
                              PendingDeprecationWarning, stacklevel=2)
            return func(*args, **kwargs)
        return wrapper
    return decorate
