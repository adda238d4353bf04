"""Python's cyclic garbage collector held off while TVM is imported and while a graph is
built (issue 11: first call).

TVM's import makes ~10^5 long-lived Python objects: the collector ran ~420 passes over
them, 0.07 s of its 0.6 s of CPU, and found nothing to free. A build makes many
short-lived ones, on a heap that holds TVM, NumPy and the model. The cycles left behind
(few: TVM objects are reference counted) are collected after.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """gc disabled inside; re-enabled after only if it was enabled before (a caller's
    gc.disable() stands; with builds on several threads the first to finish re-enables)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
