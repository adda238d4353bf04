"""Benchmark worker: megtrace (compile_graph) on a model file, in its own process so
that TVM_NUM_THREADS, set by the coordinator before TVM loads, is the thread count.

    python worker_megtrace.py '{"mode": "model", "model_file": ..., ...}'

mode "trace" (what bench_models.py times): the model as a user runs it, a function
decorated with `trace(symbolic=True, capture_as_const=True)`: its default (replaying)
`__call__` and the same function traced with `without_host=True`, timed alternately in
rounds; the first call's seconds (record + build) too, and this host's measured FMA
peak per thread (fma_peak.py) for the %peak column.
mode "model": load the .mge with megtrace.load_graph, build it with compile_graph
(or load the library an earlier run exported), time the VM on device tensors, save
the output. mode "overhead": per-call cost of a tiny traced MLP on each call path.
mode "tune": megtrace.relay_bridge.tuning.tune on the model (records into cfg["tune_dir"]).
mode "tuned": build it with compile_tuned from those records and time it like "model".
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]

from bench_common import (emit, median_seconds, median_wall_cpu,  # noqa: E402
                          peak_rss_mb)


def run_model(cfg: dict) -> None:
    from megtrace.relay_bridge._tvm import relax, tvm
    t = tvm()
    library = Path(cfg["library"])
    x = np.load(cfg["inputs"])["data"]
    result = {}
    if library.is_file():
        executable = t.runtime.load_module(str(library))
    else:
        from megtrace import load_graph
        from nets import graph_flops
        from megtrace.relay_bridge import compile_graph
        from megtrace.relay_bridge.export import export
        graph = load_graph(cfg["model_file"]).graph
        compiled = compile_graph(graph)
        executable = compiled.executable
        result.update(build_s=round(compiled.build_seconds, 2), pipeline=compiled.pipeline,
                      flops=graph_flops(graph), build_peak_mb=round(peak_rss_mb(), 1))
        export(compiled, library)
    dev = t.cpu(0)
    main = relax().VirtualMachine(executable, dev)["main"]
    arg = t.runtime.tensor(x, dev)
    out = main(arg)[0].numpy()
    np.save(cfg["out"], out)
    secs, n = median_seconds(lambda: main(arg), cfg.get("min_time", 1.0))
    emit(median_ms=secs * 1e3, iters=n, threads=t.runtime.num_threads(), **result)


def run_trace(cfg: dict) -> None:
    import statistics
    import time

    import megtrace as mge
    import nets
    from megtrace.jit import trace
    net = nets.build(cfg["model"])
    with np.load(cfg["state"]) as data:
        net.load_state_dict({k: data[k] for k in data.files})
    xt = mge.tensor(np.load(cfg["inputs"])["data"])

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    @trace(symbolic=True, capture_as_const=True, without_host=True)
    def infer_fast(data):
        return net(data)

    start = time.perf_counter()
    out = infer(xt).numpy()
    first_call_s = time.perf_counter() - start
    infer_fast(xt)
    np.save(cfg["out"], out)
    fns = {"call": lambda: infer(xt).numpy(), "without_host": lambda: infer_fast(xt).numpy()}
    min_time = float(cfg.get("min_time", 1.0))
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(3):              # alternate so that load changes hit both alike
        for k, fn in fns.items():
            w, c, _n = median_wall_cpu(fn, min_time / 3, min_iters=3)
            wall[k].append(w)
            cpu[k].append(c)
    from megtrace.relay_bridge._tvm import tvm
    from fma_peak import fma_peak_gflops
    emit(median_ms=statistics.median(wall["call"]) * 1e3,
         without_host_ms=statistics.median(wall["without_host"]) * 1e3,
         cpu_ms=statistics.median(cpu["call"]) * 1e3,
         without_host_cpu_ms=statistics.median(cpu["without_host"]) * 1e3,
         first_call_s=round(first_call_s, 2), flops=nets.graph_flops(infer.graph),
         threads=tvm().runtime.num_threads(), fma_peak_gflops=round(fma_peak_gflops(), 1))


def run_tune(cfg: dict) -> None:
    from megtrace import load_graph
    from megtrace.relay_bridge.tuning import tune
    graph = load_graph(cfg["model_file"]).graph
    s = tune(graph, cfg.get("target", "llvm"), work_dir=cfg["tune_dir"],
             trials=int(cfg["trials"]), num_threads=int(cfg["threads"]), progress=False)
    emit(tune_s=round(s.seconds, 2), total_trials=s.total_trials, tasks=len(s.tasks),
         kept=sum(1 for t in s.tasks if t.kept), untuned_ms=s.untuned_ms,
         tuned_ms=s.tuned_ms, note=s.note, summary=str(s))


def run_tuned(cfg: dict) -> None:
    from megtrace import load_graph
    from megtrace.relay_bridge._tvm import relax, tvm
    from megtrace.relay_bridge.tuning import compile_tuned
    t = tvm()
    x = np.load(cfg["inputs"])["data"]
    graph = load_graph(cfg["model_file"]).graph
    # num_threads: the records are stored per target, and tune's target has
    # "num-cores" = the thread count it was given
    compiled = compile_tuned(graph, cfg.get("target", "llvm"), cfg["tune_dir"],
                             num_threads=int(cfg["threads"]))
    dev = t.cpu(0)
    main = relax().VirtualMachine(compiled.executable, dev)["main"]
    arg = t.runtime.tensor(x, dev)
    out = main(arg)[0].numpy()
    np.save(cfg["out"], out)
    secs, n = median_seconds(lambda: main(arg), cfg.get("min_time", 1.0))
    emit(median_ms=secs * 1e3, iters=n, threads=t.runtime.num_threads(),
         build_s=round(compiled.build_seconds, 2), pipeline=compiled.pipeline)


def run_overhead(cfg: dict) -> None:
    import megtrace as mge
    from megtrace.jit import trace
    from models import MLP
    from megtrace.relay_bridge import compile_graph
    from megtrace.relay_bridge._tvm import relax, tvm

    net = MLP().eval()
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    xt = mge.tensor(x)
    fast = trace(lambda d: net(d), symbolic=True, capture_as_const=True, without_host=True)
    replay = trace(lambda d: net(d), symbolic=True, capture_as_const=True)
    fast(xt)
    replay(xt)
    compiled = compile_graph(fast.graph)
    t = tvm()
    main = relax().VirtualMachine(compiled.executable, t.cpu(0))["main"]
    arg = t.runtime.tensor(x, t.cpu(0))
    min_time = cfg.get("min_time", 1.0)
    us = {}
    for name, fn in (("vm", lambda: main(arg)), ("compiled_graph", lambda: compiled(x)),
                     ("trace_without_host", lambda: fast(xt)),
                     ("trace_replay", lambda: replay(xt))):
        us[name] = median_seconds(fn, min_time, max_iters=20000)[0] * 1e6
    emit(call_us=us, threads=t.runtime.num_threads())


if __name__ == "__main__":
    config = json.loads(sys.argv[1])
    {"overhead": run_overhead, "tune": run_tune, "trace": run_trace,
     "tuned": run_tuned}.get(config.get("mode"), run_model)(config)
