"""What a person waiting on `tune` sees: a live progress bar (rich) in terminals and
notebooks, one line per measured batch elsewhere (logs, pipes, CI).

MetaSchedule's own output is a full table per batch (kept in the work_dir logs). The
display shows the phase from the first moment (lowering and task extraction take
seconds before the first trial), then tasks done, trials, the best latency so far and
an ETA, and counts build and run errors so that a run where nothing could be measured
is visible at once.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class TaskStats:
    name: str
    flop: float
    trials: int = 0
    best_s: float | None = None
    build_errors: int = 0
    run_errors: int = 0
    finished: bool = False          # the scheduler stopped it (space exhausted)

    def best_text(self) -> str:
        if self.best_s is None:
            return "no valid candidate yet"
        text = f"best {self.best_s * 1e6:.2f} us"
        if self.flop:
            text += f" ({self.flop / self.best_s / 1e9:.1f} GFLOP/s)"
        return text


class Display(Protocol):
    def phase(self, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def update(self, progress: "Progress", task_id: int | None) -> None: ...
    def close(self) -> None: ...
    def summary(self, summary: Any) -> None: ...


@dataclass
class Progress:
    """Statistics of a tuning run, filled by the measure callback, shown by `display`."""

    budget_per_task: int
    tasks: list[TaskStats] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    display: Display | None = None

    @property
    def total_trials(self) -> int:
        return sum(t.trials for t in self.tasks)

    @property
    def tasks_done(self) -> int:
        return sum(1 for s in self.tasks if s.finished or s.trials >= self.budget_per_task)

    @property
    def expected_trials(self) -> int:
        """The budget, less what tasks stopped early (search space exhausted) left."""
        return sum(t.trials if t.finished else max(t.trials, self.budget_per_task)
                   for t in self.tasks)

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
        if self.display is not None:
            self.display.update(self, task_id)

    def line(self, task_id: int) -> str:
        t = self.tasks[task_id]
        errs = ""
        if t.build_errors or t.run_errors:
            errs = f", {t.build_errors} build / {t.run_errors} run errors"
        total = self.budget_per_task * len(self.tasks)
        return (f"tune [{self.tasks_done}/{len(self.tasks)} tasks] {t.name}: {t.trials}/"
                f"{self.budget_per_task} trials, {t.best_text()}{errs}; {self.total_trials}/"
                f"{total} trials, {time.perf_counter() - self.started:.0f} s")


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


class LineDisplay:
    """Plain lines on stdout: for logs and pipes, where a live bar would print nothing
    until the end."""

    def __init__(self, stream=None):
        self.stream = stream

    def _print(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)

    def phase(self, text: str) -> None:
        self._print(f"tune: {text}")

    def note(self, text: str) -> None:
        self._print(f"tune: {text}")

    def update(self, progress: Progress, task_id: int | None) -> None:
        if task_id is not None:
            self._print(progress.line(task_id))

    def close(self) -> None:
        pass

    def summary(self, summary: Any) -> None:
        self._print(str(summary))


class RichDisplay:
    """A live bar: phase or "[k/n tasks]", trials done of the budget, the current
    task's best latency, elapsed time and ETA."""

    def __init__(self, console: Any):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar,
                                   SpinnerColumn, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)
        self.console = console
        from rich.table import Column
        self.bar = Bar(SpinnerColumn(),
                       TextColumn("{task.description}", table_column=Column(no_wrap=True)),
                       BarColumn(bar_width=20),
                       MofNCompleteColumn(), TextColumn("trials"),
                       TextColumn("{task.fields[best]}"), TimeElapsedColumn(),
                       TextColumn("ETA"), TimeRemainingColumn(), console=console,
                       refresh_per_second=4)
        self.bar.start()
        self.row = self.bar.add_task("tune: starting", total=None, best="")

    def phase(self, text: str) -> None:
        self.bar.update(self.row, description=f"tune: {text}")

    def note(self, text: str) -> None:
        self.bar.console.print(f"tune: {text}")

    def update(self, progress: Progress, task_id: int | None) -> None:
        best = ""
        if task_id is not None:
            task = progress.tasks[task_id]
            name = task.name if len(task.name) <= 28 else task.name[:27] + "…"
            best = f"{name}: {task.best_text()}"
        self.bar.update(self.row, total=progress.expected_trials,
                        completed=progress.total_trials, best=best,
                        description=f"tune [{progress.tasks_done}/{len(progress.tasks)} "
                                    "tasks]")

    def close(self) -> None:
        self.bar.stop()

    def summary(self, summary: Any) -> None:
        self.console.print(summary)


class NoDisplay:
    def phase(self, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def update(self, progress: Progress, task_id: int | None) -> None:
        pass

    def close(self) -> None:
        pass

    def summary(self, summary: Any) -> None:
        pass


def make_display(enabled: bool, console: Any = None) -> Display:
    """The live bar where it can redraw (a terminal; Jupyter with ipywidgets, which
    rich's live display needs there), lines elsewhere, nothing when disabled."""
    if not enabled:
        return NoDisplay()
    from rich.console import Console
    console = console or Console(highlight=False)
    if console.is_jupyter:
        try:
            import ipywidgets  # noqa: F401  (rich's Jupyter live display)
        except ImportError:
            return LineDisplay()
        return RichDisplay(console)
    if console.is_terminal and not console.is_dumb_terminal:
        return RichDisplay(console)
    return LineDisplay()
