"""`HookHandler`: what `Module.register_forward_(pre_)hook` returns."""
from __future__ import annotations

import itertools
import weakref
from typing import Callable

_ids = itertools.count()


class HookHandler:
    """Holds a hook's place in its module's hook table; `remove()` takes it out."""

    def __init__(self, source: dict, hook: Callable):
        self.id = next(_ids)
        source[self.id] = hook
        self.source_ref = weakref.ref(source)

    def remove(self) -> None:
        source = self.source_ref()
        if source is not None:
            source.pop(self.id, None)
