"""Distributed helpers that have a single-process meaning."""
from __future__ import annotations

import functools
from typing import Callable

from .group import group_barrier, is_distributed


def synchronized(func: Callable) -> Callable:
    """Decorator: every rank waits for the others after `func` (a no-op in one process)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        result = func(*args, **kwargs)
        if is_distributed():
            group_barrier()
        return result

    return wrapper
