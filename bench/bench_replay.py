"""What the Python replay costs on top of the compiled graph (issue 11).

    TVM_NUM_THREADS=1 python bench/bench_replay.py [--models demo,resnet18,mobilenetv2]
        [--ops 400] [--rounds 60] [--train 32x32]

1. per-op replay overhead: a chain of `--ops` cheap elementwise ops on a 1-element
   tensor, traced; (default __call__ - without_host) / ops, so the compiled graph's own
   time cancels out.
2. per model: the default (replaying) __call__ against without_host on the SAME trace
   and compiled graph (the flag is flipped between calls), timed alternately so that
   a shared machine's noise hits both; medians and the ratio. The replaying call is
   timed both ways megtrace/jit/overlap.py allows: the replay before the compiled run
   (MEGTRACE_REPLAY_OVERLAP=0) and the compiled run on a worker beside the replay
   (=1; the default where TVM's threads leave a core free).
3. per model: the replay's Python alone (the graph's results handed in), back to back
   and right after a compiled run: a default call runs it with caches the graph's
   weights have just flushed.
4. with --train 32x32: the same for bench_training.py's traced ResNet-18 step (forward,
   GradManager backward, SGD), in CPU time.
Also prints the first call (trace + build) of each model, wall and CPU seconds (CPU
time, all threads: on a shared machine the wall time is mostly waiting), and the load
average around the run. Figures, not asserts.
"""
from __future__ import annotations

import argparse
import os
from concurrent.futures import Future
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]

import megtrace as mge  # noqa: E402
import megtrace.functional as F  # noqa: E402
from megtrace.dispatch import recording  # noqa: E402
from megtrace.jit import overlap, trace  # noqa: E402
from megtrace.jit.replay import Replayer  # noqa: E402


def alternate(calls: dict, rounds: int) -> dict[str, float]:
    """Median seconds of each callable, called in turn `rounds` times."""
    for fn in calls.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def traced_pair(fn, x):
    """(the trace, its default call, its without_host call, first-call (wall, CPU) seconds, ops
    recorded) for one trace of `fn`."""
    tr = trace(fn, symbolic=True, capture_as_const=True)
    t0, c0 = time.perf_counter(), time.process_time()
    tr(x)
    first = (time.perf_counter() - t0, time.process_time() - c0)

    def default():                # overlap.py as the environment decides
        overlap.enabled, tr._without_host = None, False
        return tr(x)

    def overlapped():             # the compiled run on a worker beside the replay
        overlap.enabled, tr._without_host = True, False
        return tr(x)

    def without_host():
        tr._without_host = True
        return tr(x)

    def sequential():             # the replay, then the graph
        overlap.enabled, tr._without_host = False, False
        return tr(x)
    a, b, c = default().numpy(), without_host().numpy(), sequential().numpy()
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-6)
    overlapped()
    return tr, default, without_host, sequential, overlapped, first, len(tr._last_entry.tape)


def per_op(ops: int, rounds: int) -> None:
    """A chain of F.relu on one float: the whole funnel (functional, apply, the tape
    check) per op, and the tape check (Replayer.record) alone."""
    from megtrace.ops import get

    def chain(x):
        for _ in range(ops):
            x = F.relu(x)
        return x
    x = mge.tensor(np.ones((1,), np.float32))
    tr, default, bare, seq, _, first, n = traced_pair(chain, x)
    t = alternate({"default": seq, "without_host": bare}, rounds)
    entry = tr._last_entry
    relu, (arg_name, arg) = get("relu"), entry.args[0]

    def record_only():
        rep = Replayer(entry, None, {})
        y = rep.bind_input(arg)
        with recording(rep):
            for _ in range(ops):
                (y,) = rep.record(relu, (y,), {})
    r = alternate({"record": record_only}, rounds)["record"]
    print(f"per-op: {n} x F.relu; default {t['default'] * 1e3:.3f} ms, without_host "
          f"{t['without_host'] * 1e3:.3f} ms -> {(t['default'] - t['without_host']) / n * 1e6:.2f}"
          f" us/op for the funnel; Replayer.record alone {r / ops * 1e6:.2f} us/op")


def replay_alone(tr, x, rounds: int) -> tuple[float, float]:
    """Median seconds of the replay's Python (the traced function checked against the
    tape, the compiled run's results already given): called back to back, and each
    time right after the compiled graph ran on this thread, as in a default call."""
    entry = tr._last_entry
    feeds = {var: x.numpy() for _, var in entry.args}
    done: Future = Future()
    done.set_result(tr._run_entry(entry, feeds))
    _, compiled = entry.compiled
    arrays = [feeds[v] for v in entry.compiled[0].inputs]

    def replay():
        rep = Replayer(entry, None, feeds)
        rep.pending = done
        (arg,) = [rep.bind_input(var) for _, var in entry.args]
        with recording(rep):
            out = tr.__wrapped__(arg)
        rep.finish([out])

    def graph():
        compiled(*arrays)
    warm = alternate({"replay": replay}, rounds * 3)["replay"]
    return warm, alternate({"graph": graph, "replay": replay}, rounds * 3)["replay"]


def model(name: str, rounds: int) -> None:
    if name == "demo":
        from megtrace.demo import Net
        net, shape = Net().eval(), (1, 3, 32, 32)
    else:
        from nets import MODELS, build
        net, shape = build(name), MODELS[name].shape(1)
    x = mge.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    tr, default, bare, seq, ovl, first, n = traced_pair(lambda x: net(x), x)

    warm, cold = replay_alone(tr, x, rounds)
    print(f"{name}: the replay's Python alone (the graph's results given) {warm * 1e3:.3f} ms "
          f"back to back, {cold * 1e3:.3f} ms right after a graph run (its weights evict "
          f"the Python objects from the core's caches: what a default call pays)")
    t = alternate({"without_host": bare, "sequential": seq, "overlapped": ovl}, rounds)
    w, s, o = t["without_host"], t["sequential"], t["overlapped"]
    overlap.enabled = None          # what a default call does here
    print(f"{name}: first call (trace+build) {first[0]:.2f} s wall, {first[1]:.2f} s CPU; "
          f"{n} recorded ops; without_host {w * 1e3:.3f} ms; default call with the "
          f"replay before the graph (MEGTRACE_REPLAY_OVERLAP=0) {s * 1e3:.3f} ms, ratio "
          f"{s / w:.3f} ({(s - w) / n * 1e6:.2f} us/op); beside it (=1) {o * 1e3:.3f} ms, "
          f"ratio {o / w:.3f}; this run's default: "
          f"{'beside' if overlap.wanted() else 'before'}")


def training(batch: int, image: int, rounds: int) -> None:
    """bench_training.py's traced ResNet-18 step (GradManager + SGD in one trace): CPU
    time of the step, of its compiled graph alone right after it (the difference is the
    replayed Python as a call pays it, caches cold), and of the step with the graph's
    results handed back at once (the replayed Python back to back)."""
    from bench_training import traced_step
    run = traced_step("megtrace", batch, image)
    run()
    run()
    entry = run.traced._last_entry
    graph, compiled = entry.compiled
    last: dict = {}

    def keep(*arrays):
        last["arrays"], last["values"] = arrays, compiled(*arrays)
        return last["values"]
    entry.compiled = (graph, keep)
    run()
    step, alone = [], []
    for _ in range(rounds):
        c0 = time.process_time()
        run()
        c1 = time.process_time()
        compiled(*last["arrays"])
        step.append(c1 - c0)
        alone.append(time.process_time() - c1)
    entry.compiled = (graph, lambda *arrays: last["values"])
    warm = []
    for _ in range(rounds):
        c0 = time.process_time()
        run()
        warm.append(time.process_time() - c0)
    entry.compiled = (graph, compiled)
    s, g, w = (statistics.median(v) * 1e3 for v in (step, alone, warm))
    n = len(entry.tape)
    print(f"training b{batch} {image}x{image}: {n} ops; step {s:.1f} ms CPU, graph alone "
          f"{g:.1f}: replayed Python {s - g:.1f} ms ({(s - g) / n * 1e3:.2f} us/op) cold, "
          f"{w:.2f} ms ({w / n * 1e3:.2f} us/op) back to back")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="demo,resnet18,mobilenetv2")
    p.add_argument("--ops", type=int, default=400)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--train", default="", help="BATCHxIMAGE (e.g. 32x32): also the "
                   "replayed Python of bench_training.py's traced step")
    a = p.parse_args(argv)
    print("load average %.2f %.2f %.2f" % os.getloadavg())
    per_op(a.ops, a.rounds * 5)
    for name in filter(None, a.models.split(",")):
        model(name, a.rounds)
    if a.train:
        batch, image = (int(v) for v in a.train.split("x"))
        training(batch, image, max(a.rounds // 4, 5))
    print("load average %.2f %.2f %.2f" % os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
