"""Python's cyclic garbage collector held off while TVM is imported, while a graph is
built (issue 11: first call) and while a traced function is replayed (issue 14).

TVM's import makes ~10^5 long-lived Python objects: the collector ran ~420 passes over
them, 0.07 s of its 0.6 s of CPU, and found nothing to free. A build makes many
short-lived ones, on a heap that holds TVM, NumPy and the model. The cycles left behind
(few: TVM objects are reference counted) are collected after.

A replay of a traced training step (ResNet-18) keeps ~5,000 containers alive while it
runs (the autodiff tape's nodes and closures, the replayed Tensors) and frees them all by
reference count at its end, leaving no cyclic garbage. With the collector on, those
temporaries outlive a few young collections each step, count as promoted to the oldest
generation, and every ~10th step trigger a full pass over the ~160k long-lived objects
(TVM, the trace, the model): 70-80 ms of CPU that frees nothing. With the collector off
during the replay, what a step leaves behind is collected, young, at the next allocation
after it. Only the moment cyclic garbage made inside a step is collected changes (after
the step, not during it); gc.collect() inside still collects.

Its own module (not relay_bridge) so that megtrace.jit can use it without importing TVM.
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
