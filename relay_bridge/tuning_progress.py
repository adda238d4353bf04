"""One line per measured batch while tuning: tasks done, trials, best latency.

MetaSchedule's own output is a full table per batch (kept in the work_dir logs); this
callback prints what a person waiting needs, and counts build and run errors so that
a run where nothing could be measured is visible at once.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class TaskStats:
    name: str
    flop: float
    trials: int = 0
    best_s: float | None = None
    build_errors: int = 0
    run_errors: int = 0
    finished: bool = False          # the scheduler stopped it (space exhausted)


@dataclass
class Progress:
    """Statistics of a tuning run, filled by the measure callback."""

    budget_per_task: int
    tasks: list[TaskStats] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    printer: Callable[[str], None] | None = None

    @property
    def total_trials(self) -> int:
        return sum(t.trials for t in self.tasks)

    def record(self, task_id: int, builder_results: list, runner_results: list,
               terminated: list[bool] | None = None) -> None:
        if terminated is not None:
            for stats, done in zip(self.tasks, terminated):
                stats.finished = stats.finished or bool(done)
        if not runner_results:
            return                      # a task whose search space ran out
        stats = self.tasks[task_id]
        for b, r in zip(builder_results, runner_results):
            stats.trials += 1
            if b.error_msg is not None:
                stats.build_errors += 1
            elif r.error_msg is not None or not r.run_secs:
                stats.run_errors += 1
            else:
                secs = sum(float(s) for s in r.run_secs) / len(r.run_secs)
                stats.best_s = secs if stats.best_s is None else min(stats.best_s, secs)
        if self.printer is not None:
            self.printer(self.line(task_id))

    def line(self, task_id: int) -> str:
        t = self.tasks[task_id]
        done = sum(1 for s in self.tasks if s.finished or s.trials >= self.budget_per_task)
        best = "no valid candidate yet"
        if t.best_s is not None:
            best = f"best {t.best_s * 1e6:.2f} us"
            if t.flop:
                best += f" ({t.flop / t.best_s / 1e9:.1f} GFLOP/s)"
        errs = ""
        if t.build_errors or t.run_errors:
            errs = f", {t.build_errors} build / {t.run_errors} run errors"
        total = self.budget_per_task * len(self.tasks)
        return (f"tune [{done}/{len(self.tasks)} tasks] {t.name}: {t.trials}/"
                f"{self.budget_per_task} trials, {best}{errs}; {self.total_trials}/{total} "
                f"trials, {time.perf_counter() - self.started:.0f} s")


def make_callback(progress: Progress) -> Any:
    """A MetaSchedule measure callback feeding `progress`."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class _Callback(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results):
            progress.record(task_id, builder_results, runner_results,
                            [bool(t.is_terminated) for t in task_scheduler.tasks_])
    return _Callback()


def stdout_printer(line: str) -> None:
    print(line, file=sys.stdout, flush=True)
