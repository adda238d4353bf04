"""MetaSchedule tuning of a megtrace model, and builds that use the records.

    summary = tune(model, trials=32, work_dir="tuning")      # per-task trial budget
    compiled = compile_tuned(graph, None, "tuning")           # a CompiledGraph

`tune` lowers the graph as a build would (the CPU rules' lowering by default, so only
the kernels the rules leave to the generic schedule are tuned; base="default" tunes
every kernel of TVM's plain lowering), legalizes and fuses it, tunes each fused
PrimFunc with a builder that avoids MetaSchedule's slow per-worker imports, measures
candidates with the deployment thread count (locally or on a device behind an RPC
tracker), then re-measures each task's best record against the untuned kernel and
keeps only the winners; last, it times the whole model tuned and as compile_graph
builds it.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._tvm import tvm
from .executable import Built, build_executable, build_tuned_executable, is_host, rules_wanted
from .ms_env import (RemoteDevice, fast_builder, light_intrinsics, make_runner,
                     quiet_console, thread_env)
from .pipelines import fuse, lower_graph
from .source import graph_of
from .targets import resolve
from .tuning_gate import GateResult, gate
from .tuning_progress import Progress, TaskStats, make_callback, make_display
from .tuning_deps import require_tuning_packages
from .tuning_store import Store, workload_key

if TYPE_CHECKING:
    from .build import CompiledGraph

BASES = ("auto", "rules", "default")


@dataclass
class TaskReport:
    """One tuned kernel. Latencies in microseconds."""

    name: str
    flop: float
    trials: int                     # measured in this run
    best_us: float | None           # best record in the database (tuning measurement)
    untuned_us: float | None = None  # quiet re-measurement of the kernel without a record
    tuned_us: float | None = None    # quiet re-measurement of the best record
    kept: bool | None = None         # None: not re-measured


@dataclass
class TuneSummary:
    """What `tune` did; str() gives a table."""

    work_dir: Path
    target: str
    target_key: str
    base: str
    num_threads: int
    tasks: list[TaskReport] = field(default_factory=list)
    total_trials: int = 0
    seconds: float = 0.0
    untuned_ms: float | None = None     # whole model as compile_graph builds it (median)
    tuned_ms: float | None = None
    note: str = ""

    @property
    def speedup(self) -> float | None:
        if self.untuned_ms and self.tuned_ms:
            return self.untuned_ms / self.tuned_ms
        return None

    def headline(self) -> str:
        return (f"tuning of {len(self.tasks)} tasks for {self.target_key} ({self.base} "
                f"lowering, {self.num_threads} threads): {self.total_trials} trials in "
                f"{self.seconds:.0f} s; database {self.work_dir / self.target_key}")

    def whole_model(self) -> str | None:
        if self.tuned_ms is None or self.untuned_ms is None:
            return None
        return (f"whole model: compile_graph {self.untuned_ms:.3f} ms, tuned "
                f"{self.tuned_ms:.3f} ms ({self.speedup:.2f}x)")

    def rows(self) -> list[tuple[str, ...]]:
        def us(v):
            return "-" if v is None else f"{v:.2f}"
        return [(t.name, str(t.trials), us(t.best_us), us(t.untuned_us), us(t.tuned_us),
                 "-" if t.kept is None else ("yes" if t.kept else "no")) for t in self.tasks]

    _COLUMNS = ("task", "trials", "best us", "untuned us", "tuned us", "kept")

    def __str__(self) -> str:
        lines = [self.headline()]
        if self.tasks:
            lines.append(f"  {'task':<40} {'trials':>6} {'best us':>9} {'untuned':>9} "
                         f"{'tuned':>9}  kept")
        for name, trials, best, untuned, tuned, kept in self.rows():
            lines.append(f"  {name[:40]:<40} {trials:>6} {best:>9} {untuned:>9} "
                         f"{tuned:>9}  {kept}")
        for extra in (self.whole_model(), self.note):
            if extra:
                lines.append("  " + extra)
        return "\n".join(lines)

    def __rich__(self) -> Any:
        """The per-task table (rich renders it in terminals and notebooks)."""
        from rich.console import Group
        from rich.table import Table
        parts: list[Any] = [self.headline()]
        if self.tasks:
            table = Table(title_justify="left")
            for col in self._COLUMNS:
                table.add_column(col, justify="left" if col == "task" else "right")
            for row in self.rows():
                table.add_row(*row)
            parts.append(table)
        parts += [extra for extra in (self.whole_model(), self.note) if extra]
        return Group(*parts)

    def __repr__(self) -> str:
        speed = f", {self.speedup:.2f}x" if self.speedup else ""
        return (f"<TuneSummary {len(self.tasks)} tasks, {self.total_trials} trials, "
                f"{self.seconds:.0f} s{speed}>")


def tuning_target(target: Any, num_threads: int | None) -> Any:
    """The target tuning and tuned builds use: an llvm target with "num-cores" set to
    the deployment thread count (MetaSchedule needs it and sizes parallel loops by it)."""
    if num_threads is not None and (isinstance(num_threads, bool) or
                                    not isinstance(num_threads, int) or num_threads < 1):
        raise ValueError(f"num_threads: expected a positive int; got {num_threads!r}")
    tgt = resolve(target)
    if tgt.kind.name != "llvm":
        raise ValueError(f"target: tuning supports llvm (CPU) targets; got "
                         f"{tgt.kind.name}. CUDA builds use dlight's GPU rules untuned")
    spec = json.loads(str(tgt))
    spec["num-cores"] = num_threads or int(spec.get("num-cores") or os.cpu_count() or 1)
    return tvm().target.Target(spec)


def tune(model: Any, target: Any = None, *, work_dir: str | os.PathLike, trials: int = 32,
         num_threads: int | None = None, progress: bool = True, base: str = "auto",
         remote: RemoteDevice | None = None, keep_only_faster: bool = True,
         compare: bool = True, cost_model: str = "auto", seed: int = 0,
         builder_timeout: float = 60.0, runner_timeout: float = 30.0) -> TuneSummary:
    """Tune `model` (traced function, load_graph model, Graph or CompiledGraph).

    trials: the budget per task. work_dir: where the JSON database lives (one folder per
    target; tuning again continues from it). num_threads: the deployment thread count
    (default: every core). base: "auto" (the CPU rules' lowering when they are on),
    "rules" or "default". remote: measure on a device behind an RPC tracker.
    keep_only_faster: re-measure each task's best record against the untuned kernel
    and let builds apply only the faster ones. compare: time the whole model tuned and
    as compile_graph builds it (on this machine only). cost_model: "xgb", "random" or
    "auto" (xgb from 16 trials per task, unless every task only moves data).
    progress: a live bar in terminals and notebooks (lines elsewhere) and a summary
    table at the end.
    """
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials: expected a positive int (trials per task); got {trials!r}")
    if cost_model not in ("auto", "xgb", "random"):
        raise ValueError(f"cost_model: expected 'auto', 'xgb' or 'random'; got {cost_model!r}")
    if base not in BASES:
        raise ValueError(f"base: expected one of {BASES}; got {base!r}")
    if remote is not None and not isinstance(remote, RemoteDevice):
        raise TypeError(f"remote: expected a RemoteDevice; got {type(remote).__name__}")
    may_use = cost_model if cost_model != "auto" else ("xgb" if trials >= 16 else "random")
    require_tuning_packages(may_use, remote is not None)
    display = make_display(progress)
    try:
        display.phase("lowering the graph and extracting tasks")
        summary = _tune(model, target, display, work_dir, trials, num_threads, base, remote,
                        keep_only_faster, compare, cost_model, seed, builder_timeout,
                        runner_timeout)
    finally:
        display.close()
    if progress:
        display.summary(summary)
    return summary


def _tune(model, target, display, work_dir, trials, num_threads, base, remote,
          keep_only_faster, compare, cost_model, seed, builder_timeout,
          runner_timeout) -> TuneSummary:
    graph, own_target = graph_of(model)
    tgt = tuning_target(target if target is not None else own_target, num_threads)
    if remote is None and not is_host(tgt):
        raise ValueError(f"target: {tgt.attrs.get('mtriple')} code cannot run here; pass "
                         "remote=RemoteDevice(...) to measure on such a device")
    store = Store(work_dir, tgt)
    if base == "auto":
        base = "rules" if rules_wanted(tgt, None) else "default"
    threads = int(tgt.attrs["num-cores"])
    summary = TuneSummary(store.work_dir, str(tgt), store.key, base, threads)
    start = time.perf_counter()
    tasks, by_rules = _tasks(graph, tgt, base)
    store.write_meta({"base": base, "target": json.loads(str(tgt)), "num_threads": threads})
    stats = Progress(trials, [TaskStats(n, _flops(t.dispatched[0])) for n, t in tasks],
                     display=display)
    worth = _worth_note(stats.tasks, by_rules)
    if not tasks:
        summary.note = worth
        summary.seconds = time.perf_counter() - start
        return summary
    if worth:
        display.note(worth)
    if cost_model == "auto":
        # xgb from 16 trials per task: each xgb update costs seconds on 2 cores, which a
        # budget of a few trials, or kernels that only move data (tiny search spaces),
        # cannot win back
        data_only = all(t.flop == 0 for t in stats.tasks)
        cost_model = "xgb" if trials >= 16 and not data_only else "random"
    display.phase(f"starting builders for {len(tasks)} task(s)")
    with thread_env(threads), light_intrinsics(tgt), quiet_console():
        builder = fast_builder(tgt, builder_timeout)
        database = store.database()
        runner = make_runner(remote, runner_timeout)
        display.update(stats, None)
        _run_tuning(tasks, tgt, store, database, builder, runner, stats, cost_model, seed)
        named = [(n, t.dispatched[0]) for n, t in tasks]
        gates: dict[str, GateResult] = {}
        if keep_only_faster:
            display.phase("re-measuring the best records against the untuned kernels")
            quiet = make_runner(remote, runner_timeout, repeat=5, min_repeat_ms=50)
            gates = {g.name: g for g in gate(named, database, tgt, builder, quiet)}
            store.record_decisions({
                workload_key(mod): {"name": n, "kept": gates[n].kept,
                                    "tuned_us": gates[n].tuned_us,
                                    "untuned_us": gates[n].untuned_us}
                for n, mod in named if gates[n].note != "no record"})
    summary.tasks = [_report(s, mod, database, tgt, gates.get(s.name))
                     for s, (_, mod) in zip(stats.tasks, named)]
    summary.total_trials = stats.total_trials
    if summary.total_trials and all(s.best_s is None for s in stats.tasks):
        summary.note = ("no candidate could be measured: see the logs in "
                        f"{store.dir / 'logs'}")
    elif gates and not any(g.kept for g in gates.values()):
        summary.note = ("no tuned kernel beat the untuned one, so builds from this work_dir "
                        "use the untuned schedules (more trials may find faster ones)")
    if compare and remote is None:
        display.phase("timing the whole model tuned and untuned")
        summary.untuned_ms, summary.tuned_ms = _compare(graph, tgt, store)
    summary.seconds = time.perf_counter() - start
    return summary


def _worth_note(tasks: list[TaskStats], by_rules: list[str]) -> str:
    """Why a run will gain little, said before it starts ("" when it may gain)."""
    ruled = (f"the CPU rules hand-schedule {len(by_rules)} kernel(s) "
             f"({_kinds(by_rules)})") if by_rules else ""
    if not tasks:
        return ("nothing to tune: " + (ruled or "the graph has no kernel to schedule")
                + (" (base='default' tunes TVM's generic lowering of every kernel instead)"
                   if by_rules else ""))
    if ruled and all(t.flop == 0 for t in tasks):
        names = ", ".join(t.name for t in tasks[:3]) + (", ..." if len(tasks) > 3 else "")
        return (f"little worth tuning: {ruled}; what is left only moves data ({names}), "
                "so expect no speed-up (base='default' tunes every kernel)")
    return ""


def _kinds(names: list[str]) -> str:
    """'conv2d x2, dense' from fused kernel names."""
    counts: dict[str, int] = {}
    for name in names:
        kind = name.removeprefix("fused_").split("_")[0].rstrip("0123456789") or name
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(k if n == 1 else f"{k} x{n}" for k, n in counts.items())


def _tasks(graph: Any, tgt: Any, base: str) -> tuple[list[tuple[str, Any]], list[str]]:
    """(name, ExtractedTask) of every fused PrimFunc that will be a kernel and is not
    already scheduled by a rule; and the names of those a rule schedules."""
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks
    mod, _ = lower_graph(graph, tgt, base)
    has_reshape_pattern = tvm().relax.analysis.has_reshape_pattern
    out, by_rules = [], []
    for task in extract_tasks(fuse(mod, tgt), tgt):
        func = task.dispatched[0]["main"]
        if func.attrs is not None and func.attrs.get("tirx.is_scheduled", False):
            by_rules.append(task.task_name)    # a hand-written rule kernel
            continue
        if has_reshape_pattern(func):
            continue                           # the build turns it into a view: no kernel
        out.append((task.task_name, task))
    return out, by_rules


def _flops(mod: Any) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops
    try:
        return float(estimate_tir_flops(mod))
    except Exception:      # an op TVM cannot count: report no GFLOP/s, tune anyway
        return 0.0


def _run_tuning(tasks, tgt, store, database, builder, runner, stats, cost_model, seed):
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir
    from tvm.s_tir.meta_schedule.measure_callback import MeasureCallback
    from tvm.s_tir.meta_schedule.tune import tune_tasks
    from tvm.s_tir.meta_schedule.utils import fork_seed
    names = [n for n, _ in tasks]
    loggers = get_loggers_from_work_dir(str(store.dir), names)
    budget = stats.budget_per_task
    contexts = [TuneContext(mod=t.dispatched[0], target=tgt, space_generator="post-order-apply",
                            search_strategy=_strategy(budget), task_name=n, logger=log,
                            rand_state=rs, num_threads=os.cpu_count() or 1).clone()
                for (n, t), log, rs in zip(tasks, loggers, fork_seed(seed, n=len(tasks)))]
    # ours first: the bar moves before the cost model's update (seconds with xgb)
    callbacks = [make_callback(stats)] + list(MeasureCallback.create("default"))
    tune_tasks(tasks=contexts, task_weights=[float(t.weight) for _, t in tasks],
               work_dir=str(store.dir), max_trials_global=budget * len(tasks),
               max_trials_per_task=budget, num_trials_per_iter=min(budget, 64),
               builder=builder, runner=runner, database=database, cost_model=cost_model,
               measure_callbacks=callbacks, task_scheduler="gradient")


def _strategy(trials: int) -> Any:
    """Evolutionary search sized to the budget: its default population (512 samples,
    4 generations) costs 10-30 s per task on 2 cores, wasted on a budget of a few
    trials."""
    from tvm.s_tir.meta_schedule.search_strategy import EvolutionarySearch
    population = min(512, max(64, 16 * trials))
    return EvolutionarySearch(population_size=population,
                              init_min_unmeasured=min(50, population // 2),
                              genetic_num_iters=4 if trials >= 16 else 2)


def _report(stats: TaskStats, mod: Any, database: Any, tgt: Any,
            g: GateResult | None) -> TaskReport:
    rec = database.query_tuning_record(mod, tgt, "main")
    best = None
    if rec is not None and rec.run_secs:
        best = statistics.mean(float(s) for s in rec.run_secs) * 1e6
    r = TaskReport(stats.name, stats.flop, stats.trials, best)
    if g is not None:
        r.untuned_us, r.tuned_us, r.kept = g.untuned_us, g.tuned_us, g.kept
    return r


def tuned_executable(graph: Any, target: Any, work_dir: str | os.PathLike, *,
                     num_threads: int | None = None) -> Built:
    """Build `graph` with the records `tune` left in `work_dir` for `target`."""
    tgt = tuning_target(target, num_threads)
    store = Store(work_dir, tgt)
    if not store.exists():
        others = store.others()
        raise ValueError(f"work_dir: no tuning for {store.key} in {str(store.work_dir)!r}"
                         + (f"; it has {others} (same target and num_threads as when "
                            "tuning?)" if others else ""))
    base = store.read_meta().get("base", "default")
    with light_intrinsics(tgt):
        database = store.applied_database()
        return build_tuned_executable(graph, tgt, database, base)


def compile_tuned(graph: Any, target: Any = None, work_dir: str | os.PathLike | None = None,
                  *, num_threads: int | None = None) -> "CompiledGraph":
    """A CompiledGraph built with the tuning records in `work_dir` (records absent from
    it, and kernels whose record lost the re-measurement, use the untuned schedule)."""
    # lazy: build imports tuning (compile_graph with a tuning_dir); a cycle left to fix
    from .build import CompiledGraph
    if work_dir is None:
        raise ValueError("work_dir: the folder `tune` wrote its records to is required")
    graph, own_target = graph_of(graph, "graph")
    built = tuned_executable(graph, target if target is not None else own_target, work_dir,
                             num_threads=num_threads)
    return CompiledGraph(graph=graph, target=built.target, executable=built.executable,
                         build_seconds=built.seconds, rules=built.rules, pipeline="tuned")


def _compare(graph: Any, tgt: Any, store: Store) -> tuple[float, float]:
    """Median ms of the whole model as compile_graph builds it and tuned, measured
    alternately in this process."""
    rx = tvm().relax
    untuned = build_executable(graph, tgt)
    tuned = tuned_executable(graph, tgt, store.work_dir,
                             num_threads=int(tgt.attrs["num-cores"]))
    dev = tvm().cpu(0)
    rng = np.random.default_rng(0)
    args = [tvm().runtime.tensor(_example(v.type, rng), dev) for v in graph.inputs]
    mains = [rx.VirtualMachine(b.executable, dev)["main"] for b in (untuned, tuned)]
    for m in mains:
        m(*args)
    times: list[list[float]] = [[], []]
    deadline = time.perf_counter() + 2.0
    while time.perf_counter() < deadline or len(times[1]) < 3:
        for i, m in enumerate(mains):
            t0 = time.perf_counter()
            m(*args)
            times[i].append(time.perf_counter() - t0)
        if len(times[1]) >= 200:
            break
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3


def _example(ty: Any, rng: np.random.Generator) -> np.ndarray:
    if np.dtype(ty.dtype).kind == "f":
        return rng.standard_normal(ty.shape).astype(ty.dtype)
    return np.zeros(ty.shape, ty.dtype)        # indices: 0 is always in range
