"""Benchmark worker for bench_tuning.py, one process per step (so the second step
proves the records are reused by a fresh process):

    python worker_tuning.py '{"mode": "tune", "model_file": ..., "tune_dir": ...,
                              "trials": 8, "threads": 1, "base": "default"}'
    python worker_tuning.py '{"mode": "compare", "model_file": ..., "tune_dir": ...,
                              "threads": 1, "min_time": 2.0, "profile_runs": 15}'

mode "tune": megtrace.relay_bridge.tuning.tune (the same call as `megtrace tune`),
its per-task table and its own whole-model comparison. mode "compare": build the
model with the CPU rules (compile_graph's build) and with compile_tuned from the
records (counting the records before and after: no re-tuning), time both whole
models alternately, then time every kernel of both builds (median over several
instrumented runs) so that each rule kernel can be set against its tuned twin.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]

from bench_common import emit, median_wall_cpu  # noqa: E402


def run_tune(cfg: dict) -> None:
    from megtrace import load_graph
    from megtrace.relay_bridge.tuning import tune
    graph = load_graph(cfg["model_file"]).graph
    s = tune(graph, None, work_dir=cfg["tune_dir"], trials=int(cfg["trials"]),
             num_threads=int(cfg["threads"]), base=cfg.get("base", "auto"), progress=False)
    tasks = [dict(name=t.name, flop=t.flop, trials=t.trials, best_us=t.best_us,
                  untuned_us=t.untuned_us, tuned_us=t.tuned_us, kept=t.kept)
             for t in s.tasks]
    emit(tune_s=round(s.seconds, 1), total_trials=s.total_trials, tasks=tasks,
         base=s.base, target_key=s.target_key, untuned_ms=s.untuned_ms,
         tuned_ms=s.tuned_ms, note=s.note)


def _records(tune_dir: Path) -> int:
    """Tuning records stored in every target folder of `tune_dir` (one JSON line each)."""
    return sum(sum(1 for line in p.open() if line.strip())
               for p in tune_dir.glob("*/database_tuning_record.json"))


def _kernel_times(builds: dict, dev, arg, runs: int,
                  clock=time.perf_counter) -> dict[str, list[tuple[str, float]]]:
    """Per build: (kernel name, median us) of every kernel call, in call order; the
    builds take turns run by run, so that load changes hit them alike. clock:
    time.thread_time measures the CPU time of one-thread kernels (they run in the
    calling thread), which a loaded machine does not inflate."""
    from megtrace.relay_bridge._tvm import relax
    calls: list[tuple[str, float]] = []
    stack: list[tuple[str, float]] = []

    def instrument(func, symbol, before_run, ret_value, *args):
        now = clock()
        if before_run:
            stack.append((str(symbol), now))
        elif stack:
            name, start = stack.pop()
            if not name.startswith("vm.builtin."):
                calls.append((name, now - start))
        return 0

    mains = {}
    for key, executable in builds.items():
        vm = relax().VirtualMachine(executable, dev)
        vm.set_instrument(instrument)
        mains[key] = vm["main"]
        mains[key](arg)                   # warm-up
    per_run: dict[str, list[list[tuple[str, float]]]] = {k: [] for k in builds}
    for _ in range(runs):
        for key, main in mains.items():
            calls.clear()
            main(arg)
            per_run[key].append(list(calls))
    return {key: [(name, statistics.median(run[i][1] for run in got) * 1e6)
                  for i, (name, _) in enumerate(got[0])]
            for key, got in per_run.items()}


def run_compare(cfg: dict) -> None:
    from megtrace import load_graph
    from megtrace.relay_bridge._tvm import relax, tvm
    from megtrace.relay_bridge.executable import build_executable
    from megtrace.relay_bridge.tuning import tuned_executable, tuning_target
    t = tvm()
    tune_dir = Path(cfg["tune_dir"])
    threads = int(cfg["threads"])
    graph = load_graph(cfg["model_file"]).graph
    x = np.load(cfg["inputs"])["data"]
    tgt = tuning_target(None, threads)
    before = _records(tune_dir)
    start = time.perf_counter()
    tuned = tuned_executable(graph, tgt, tune_dir, num_threads=threads)
    tuned_build_s = time.perf_counter() - start
    rules = build_executable(graph, tgt)
    after = _records(tune_dir)
    dev = t.cpu(0)
    arg = t.runtime.tensor(x, dev)
    mains = {k: relax().VirtualMachine(b.executable, dev)["main"]
             for k, b in (("rules", rules), ("tuned", tuned))}
    outs = {k: m(arg)[0].numpy() for k, m in mains.items()}
    err = float(np.abs(outs["tuned"] - outs["rules"]).max()
                / max(np.abs(outs["rules"]).max(), 1e-30))
    # alternate the two builds in rounds so that load changes hit both alike
    wall: dict[str, list[float]] = {"rules": [], "tuned": []}
    cpu: dict[str, list[float]] = {"rules": [], "tuned": []}
    min_time = float(cfg.get("min_time", 2.0))
    for _ in range(5):
        for k, m in mains.items():
            w, c, _n = median_wall_cpu(lambda: m(arg), min_time / 10, min_iters=3)
            wall[k].append(w)
            cpu[k].append(c)
    ms = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
    cpu_ms = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    runs = int(cfg.get("profile_runs", 15))
    builds = {"rules": rules.executable, "tuned": tuned.executable}
    # one thread: the kernels' CPU time; several: wall time (CPU time counts spinning)
    kernels = _kernel_times(builds, dev, arg, runs,
                            time.thread_time if threads == 1 else time.perf_counter)
    emit(rules_ms=ms["rules"], tuned_ms=ms["tuned"], rules_cpu_ms=cpu_ms["rules"],
         tuned_cpu_ms=cpu_ms["tuned"], tuned_build_s=round(tuned_build_s, 2),
         rules_build_s=round(rules.seconds, 2), records_before=before, records_after=after,
         rel_err=err, kernels=kernels, rules_pipeline=rules.pipeline, threads=threads)


if __name__ == "__main__":
    config = json.loads(sys.argv[1])
    {"tune": run_tune, "compare": run_compare}[config["mode"]](config)
