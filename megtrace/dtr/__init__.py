"""`megtrace.dtr`: MegEngine's dynamic tensor rematerialization for eager mode.

    import megtrace as mge
    mge.dtr.eviction_threshold = "2GB"
    mge.dtr.enable()

Above the threshold, eager values are evicted by DTR's heuristic and recomputed from
their recorded producers when read again (megtrace/dtr/pool.py). Inside `trace`, use
`trace(dtr_config=DTRConfig(...))` (a checkpoint plan of the compiled graph).
"""
from __future__ import annotations

import re
import sys
import types
from typing import Union

from .. import dispatch
from .pool import POOL

__all__ = ["disable", "enable", "enable_sqrt_sampling", "evictee_minimum_size",
           "eviction_threshold"]


def _str2bytes(text: str) -> int:
    found = re.findall(r"(\d+(?:\.\d+)?)\s*([kmg]?b)", text, re.IGNORECASE)
    if len(found) != 1:
        raise ValueError("Formatting of `value` only supports bytes(B), kilobyte(KB), "
                         "megabyte(MB) and gigabyte(GB) units")
    order = ["b", "kb", "mb", "gb"]
    return int(float(found[0][0]) * 1024 ** order.index(found[0][1].lower()))


def _as_bytes(value: Union[int, str]) -> int:
    if isinstance(value, str):
        return _str2bytes(value)
    if isinstance(value, int):
        return value
    raise TypeError("`value` should be a str or an int")


def enable() -> None:
    """Record how eager values are computed and evict them above the threshold."""
    POOL.enabled = True
    dispatch.dtr = POOL


def disable() -> None:
    """Stop recording and evicting (values evicted already still come back when read)."""
    POOL.enabled = False
    dispatch.dtr = None
    POOL.clear_candidates()


class _DtrModule(types.ModuleType):
    """Module properties, as MegEngine's mprop gives them."""

    @property
    def eviction_threshold(self) -> int:
        """Bytes of candidate values above which DTR evicts (0: never); an int or a
        string such as "2GB"."""
        return POOL.threshold

    @eviction_threshold.setter
    def eviction_threshold(self, value: Union[int, str]) -> None:
        POOL.threshold = _as_bytes(value)
        if POOL.enabled and POOL.threshold > 0:
            POOL.evict_until(POOL.threshold)

    @property
    def evictee_minimum_size(self) -> int:
        """Values smaller than this (bytes; an int or "2MB") are never evicted."""
        return POOL.minimum_size

    @evictee_minimum_size.setter
    def evictee_minimum_size(self, value: Union[int, str]) -> None:
        POOL.minimum_size = _as_bytes(value)

    @property
    def enable_sqrt_sampling(self) -> bool:
        """Score only a random sqrt(N) of the N candidates when choosing what to evict."""
        return POOL.sqrt_sampling

    @enable_sqrt_sampling.setter
    def enable_sqrt_sampling(self, value: bool) -> None:
        POOL.sqrt_sampling = bool(value)


sys.modules[__name__].__class__ = _DtrModule
