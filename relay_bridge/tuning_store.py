"""The layout of a tuning work_dir: one MetaSchedule JSON database per target.

MetaSchedule keys records by workload (the structural hash of a fused PrimFunc) but
not by target, so records tuned for one CPU would be applied to another. Each target
(kind, CPU, thread count) gets its own folder:

    work_dir/<target key>/database_workload.json        every workload tuned
    work_dir/<target key>/database_tuning_record.json   every measured candidate
    work_dir/<target key>/megtrace.json                  lowering base, target
    work_dir/<target key>/decisions.json                 per workload: apply its record?
    work_dir/<target key>/logs/                          MetaSchedule's task logs

Decisions are keyed by workload hash and updated, never rewritten, so one work_dir can
hold the tuning of several models.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

META = "megtrace.json"
DECISIONS = "decisions.json"


def workload_key(mod: Any) -> str:
    """The key MetaSchedule's JSON database uses for a workload: its structural hash."""
    from tvm_ffi import structural_hash
    return str(structural_hash(mod))


def target_key(target: Any) -> str:
    """A readable, stable folder name for a target, e.g. llvm-znver4-t2-1a2b3c4d."""
    spec = json.loads(str(target))
    spec.pop("tag", None)
    spec.pop("keys", None)
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    cpu = spec.get("mcpu") or spec.get("arch") or "generic"
    triple = str(spec.get("mtriple", "")).split("-")[0]
    parts = [spec["kind"], triple, cpu, f"t{spec.get('num-cores', 0)}", digest]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(p for p in parts if p))


class Store:
    """The folder of one target inside a work_dir."""

    def __init__(self, work_dir: str | os.PathLike, target: Any):
        if not isinstance(work_dir, (str, os.PathLike)):
            raise TypeError(f"work_dir: expected a folder path; got {type(work_dir).__name__}")
        self.work_dir = Path(os.fspath(work_dir))
        if self.work_dir.exists() and not self.work_dir.is_dir():
            raise ValueError(f"work_dir: {str(self.work_dir)!r} is a file, not a folder")
        self.key = target_key(target)
        self.dir = self.work_dir / self.key

    def exists(self) -> bool:
        """Whether `tune` ran for this target (it may have found nothing to tune)."""
        return (self.dir / META).is_file()

    def database(self) -> Any:
        """Every record (created if missing)."""
        from tvm.s_tir.meta_schedule.database import JSONDatabase
        self.dir.mkdir(parents=True, exist_ok=True)
        return JSONDatabase(work_dir=str(self.dir))

    def decisions(self) -> dict[str, dict[str, Any]]:
        """Per workload hash: {"name", "kept", "tuned_us", "untuned_us"}."""
        path = self.dir / DECISIONS
        return json.loads(path.read_text()) if path.is_file() else {}

    def record_decisions(self, new: dict[str, dict[str, Any]]) -> None:
        merged = {**self.decisions(), **new}
        (self.dir / DECISIONS).write_text(json.dumps(merged, indent=1) + "\n")

    def applied_database(self) -> Any:
        """The best record of every workload not rejected by a re-measurement, in memory
        (what tuned builds apply)."""
        from tvm.s_tir.meta_schedule.database import MemoryDatabase, TuningRecord
        full, decisions = self.database(), self.decisions()
        applied = MemoryDatabase()
        seen: set[str] = set()
        for rec in full.get_all_tuning_records():
            key = workload_key(rec.workload.mod)
            if key in seen or not decisions.get(key, {}).get("kept", True):
                continue
            seen.add(key)
            best = full.get_top_k(rec.workload, 1)
            if best:
                b = best[0]
                workload = applied.commit_workload(rec.workload.mod)
                applied.commit_tuning_record(TuningRecord(b.trace, workload, b.run_secs,
                                                          b.target, b.args_info))
        return applied

    def read_meta(self) -> dict[str, Any]:
        path = self.dir / META
        return json.loads(path.read_text()) if path.is_file() else {}

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / META).write_text(json.dumps(meta, indent=1) + "\n")

    def others(self) -> list[str]:
        """Target folders present in the work_dir (for error messages)."""
        if not self.work_dir.is_dir():
            return []
        return sorted(p.name for p in self.work_dir.iterdir() if (p / META).is_file())
