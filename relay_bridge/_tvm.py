"""The only place that imports TVM: version gate and thread-count set-up.

TVM's runtime uses half the cores unless TVM_NUM_THREADS is set, so megtrace sets it to
all cores before the first import (a user's own setting wins).
"""
from __future__ import annotations

import os
from functools import lru_cache

from .gc_pause import collector_paused

REQUIRED = "0.27"


@lru_cache(maxsize=None)
def tvm():
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))
    try:
        with collector_paused():     # ~10^5 long-lived objects: 12% of the import was gc
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
