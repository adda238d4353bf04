"""The only place that imports TVM: version gate and thread-count set-up.

TVM's runtime uses half the cores unless TVM_NUM_THREADS is set, so megtrace sets it to
all cores before the first import (a user's own setting wins).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

from megtrace.gc_pause import collector_paused

REQUIRED = "0.27"


@lru_cache(maxsize=None)
def tvm():
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))
    try:
        # ~10^5 long-lived objects: 12% of the import was gc
        with collector_paused(), _global_names_listed_once():
            import tvm as _tvm
            from tvm import relax  # noqa: F401
    except ImportError as e:
        raise ImportError("megtrace needs apache-tvm==0.27.* (pip install -e .); "
                          f"importing it failed: {e}") from e
    if not _tvm.__version__.startswith(REQUIRED):
        raise ImportError(f"megtrace needs apache-tvm {REQUIRED}.*, found {_tvm.__version__}")
    return _tvm


def relax():
    return tvm().relax


@contextmanager
def _global_names_listed_once() -> Iterator[None]:
    """Inside, tvm_ffi's list of global function names is made again only when the number
    of registered functions has changed (issue 11: first call). Each of TVM's ~50
    `_ffi_api` modules fills itself at import by listing every registered function
    (~2100 names, one FFI call per name) to pick those of its prefix: 0.15 s of the
    import's 0.65 s of CPU. Names are only added while TVM imports (a library's, or a
    Python function's registration, which changes the count; nothing removes one), so
    an unchanged count means an unchanged list; tests/perf/test_tvm_import.py checks
    that every `_ffi_api` module gets the same functions."""
    try:
        from tvm_ffi import registry
        lister = registry.get_global_func("ffi.FunctionListGlobalNamesFunctor")
    except (ImportError, AttributeError, ValueError):   # another tvm_ffi: list as it does
        lister = None
    if lister is None:
        yield
        return
    original = registry.list_global_func_names
    kept: list[str] = []

    def listed() -> list[str]:
        names = lister()
        count = names(-1)
        if count != len(kept):
            kept[:] = [names(i) for i in range(count)]
        return list(kept)
    registry.list_global_func_names = listed
    try:
        yield
    finally:
        registry.list_global_func_names = original
