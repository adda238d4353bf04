"""Tuning and deployable export, re-exported from megtrace.relay_bridge (imported lazily: megtrace
itself never loads TVM at import time)."""
from __future__ import annotations

from typing import Any


def tune(model: Any, target: Any = None, **kwargs):
    """MetaSchedule tuning of a traced function, a loaded model or a Graph; see
    `megtrace.relay_bridge.tuning.tune` (work_dir=..., trials=... per task, num_threads=...)."""
    # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
    from megtrace.relay_bridge.tuning import tune as _tune
    return _tune(model, target, **kwargs)


def export(model: Any, path, target: Any = None, **kwargs):
    """A TVM shared library (weights inside) + `<path>.json` manifest that
    `load_exported` (or relay_bridge/deploy.py alone) runs without the tracer."""
    # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
    from megtrace.relay_bridge.export import export as _export
    return _export(model, path, target, **kwargs)


def load_exported(path):
    # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
    from megtrace.relay_bridge.export import load_exported as _load
    return _load(path)
