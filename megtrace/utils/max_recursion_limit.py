"""MegEngine's `max_recursion_limit()`: a context manager that lifts Python's recursion
limit (and the stack's soft rlimit to its hard one) while deep structures are pickled or
traversed, reentrant and thread safe; leaving the outermost block restores both."""
from __future__ import annotations

import sys
import threading

try:
    import resource
except ImportError:          # Windows: only Python's limit
    resource = None


class AlternativeRecursionLimit:
    """Sets the recursion limit to `new_py_limit` inside the (possibly nested) block."""

    def __init__(self, new_py_limit: int):
        self.new_py_limit = new_py_limit
        self._depth = 0
        self._lock = threading.Lock()
        self._saved: tuple | None = None

    def __enter__(self) -> "AlternativeRecursionLimit":
        with self._lock:
            if self._depth == 0:
                stack = resource.getrlimit(resource.RLIMIT_STACK) if resource else None
                self._saved = (sys.getrecursionlimit(), stack)
                if stack is not None:
                    try:
                        resource.setrlimit(resource.RLIMIT_STACK, (stack[1], stack[1]))
                    except (ValueError, OSError):     # not allowed here: Python's limit only
                        pass
                sys.setrecursionlimit(self.new_py_limit)
            self._depth += 1
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._saved is not None:
                limit, stack = self._saved
                sys.setrecursionlimit(limit)
                if stack is not None:
                    try:
                        resource.setrlimit(resource.RLIMIT_STACK, stack)
                    except (ValueError, OSError):
                        pass


_MAX = AlternativeRecursionLimit(2**31 - 1)


def max_recursion_limit() -> AlternativeRecursionLimit:
    """`with max_recursion_limit(): ...` runs the block with the largest recursion limit."""
    return _MAX
