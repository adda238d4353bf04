"""The collector pause used by TVM's import and builds; it lives in megtrace/gc_pause.py
(replays use it too, and must not import TVM)."""
from megtrace.gc_pause import collector_paused

__all__ = ["collector_paused"]
