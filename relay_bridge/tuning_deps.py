"""The optional packages MetaSchedule needs, checked before tuning starts.

TVM imports them deep inside a tuning run (xgboost when the cost model is first
trained, cloudpickle in the builder's worker pool), so a missing one used to surface
as a RuntimeError twelve frames down after minutes of work. They ship as megtrace's
`tune` extra.
"""
from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install 'megtrace[tune]'"


def missing_tuning_packages(cost_model: str, remote: bool) -> list[str]:
    """The import names a tuning run with this cost model would fail to import."""
    wanted = ["psutil", "cloudpickle"]
    if cost_model == "xgb":
        wanted += ["xgboost", "scipy"]
    if remote:
        wanted.append("tornado")
    return [name for name in wanted if importlib.util.find_spec(name) is None]


def require_tuning_packages(cost_model: str, remote: bool) -> None:
    """Raise ImportError in one line naming what is missing and how to install it."""
    missing = missing_tuning_packages(cost_model, remote)
    if missing:
        raise ImportError(f"tuning needs {', '.join(missing)} (not installed): "
                          f"{INSTALL_HINT}")
