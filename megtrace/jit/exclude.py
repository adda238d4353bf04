"""`exclude_from_trace`: MegEngine's context manager for code that a trace must not
record (it runs eagerly on every call, e.g. a data-dependent nms without max_output)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..dispatch import active_recorder, recording


@contextmanager
def exclude_from_trace() -> Iterator[None]:
    """Inside the block ops run eagerly, unrecorded. Traced tensors alive on entry become
    plain tensors holding their values (as in MegEngine), and later traced ops read them
    as values from outside the function. Outside a trace (or nested) it does nothing."""
    rec = active_recorder()
    if rec is None:
        yield
        return
    rec.materialize_live()
    with recording(None):
        yield
