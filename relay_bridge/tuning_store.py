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
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from megtrace import atomic_io

log = logging.getLogger(__name__)

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
        self._repair_database()
        try:
            return JSONDatabase(work_dir=str(self.dir))
        except Exception as e:            # noqa: BLE001 - TVM raises InternalError/TVMError
            first = (str(e).strip().splitlines() or [""])[0]
            moved = []
            for name in ("database_workload.json", "database_tuning_record.json"):
                path = self.dir / name
                if path.exists():
                    aside = path.with_name(f"{name}.unreadable-{int(time.time())}")
                    os.replace(path, aside)
                    moved.append(aside.name)
            log.warning("tuning: the database in %s could not be read (%s); moved aside as "
                        "%s and starting an empty one", self.dir, first, ", ".join(moved))
            return JSONDatabase(work_dir=str(self.dir))

    def _repair_database(self) -> None:
        """MetaSchedule appends one JSON line per workload/record; a process killed
        mid-line leaves a torn last line that would make every later load fail. Torn
        lines (and records of a dropped workload) are dropped with a warning."""
        workloads = self.dir / "database_workload.json"
        records = self.dir / "database_tuning_record.json"
        kept_workloads = _valid_lines(workloads, lambda v: isinstance(v, list) and len(v) == 2)
        if kept_workloads is None:
            return
        count = len(kept_workloads)
        _valid_lines(records, lambda v: isinstance(v, list) and len(v) == 2
                     and isinstance(v[0], int) and 0 <= v[0] < count
                     and isinstance(v[1], list) and len(v[1]) == 4)

    def decisions(self) -> dict[str, dict[str, Any]]:
        """Per workload hash: {"name", "kept", "tuned_us", "untuned_us"}."""
        return _read_json(self.dir / DECISIONS)

    def record_decisions(self, new: dict[str, dict[str, Any]]) -> None:
        merged = {**self.decisions(), **new}
        atomic_io.write_text(self.dir / DECISIONS, json.dumps(merged, indent=1) + "\n")

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
        return _read_json(self.dir / META)

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_io.write_text(self.dir / META, json.dumps(meta, indent=1) + "\n")

    def others(self) -> list[str]:
        """Target folders present in the work_dir (for error messages)."""
        if not self.work_dir.is_dir():
            return []
        return sorted(p.name for p in self.work_dir.iterdir() if (p / META).is_file())


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file; a missing, torn or foreign one reads as empty, with a warning
    (it is rewritten whole by the next tuning run)."""
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        log.warning("tuning: ignoring unreadable %s (%s)", path, e)
        return {}
    if not isinstance(value, dict):
        log.warning("tuning: ignoring %s: not a JSON object", path)
        return {}
    return value


def _valid_lines(path: Path, accept) -> list[str] | None:
    """The lines of a JSON-lines file that parse and satisfy `accept`; the file is
    rewritten without the others (warning). None when the file does not exist."""
    if not path.is_file():
        return None
    data = path.read_bytes()
    raw = data.decode("utf-8", errors="replace").splitlines()
    kept = []
    for line in raw:
        if not line.strip():
            continue
        try:
            ok = accept(json.loads(line))
        except ValueError:
            ok = False
        if ok:
            kept.append(line)
    dropped = sum(1 for line in raw if line.strip()) - len(kept)
    if dropped:
        log.warning("tuning: dropped %d torn or inconsistent line(s) of %s", dropped, path)
    clean = "".join(line + "\n" for line in kept)
    if clean.encode() != data:
        # blank lines go too: TVM's loader parses lines on worker threads, and a line of
        # only whitespace (\v, \f, ...) makes its parser throw there: a segfault
        atomic_io.write_text(path, clean)
    return kept
