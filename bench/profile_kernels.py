"""Per-kernel milliseconds of a bench model's compiled graph (not a test).

    TVM_NUM_THREADS=2 .venv/bin/python bench/profile_kernels.py --model encoder [--runs 20]
    TVM_NUM_THREADS=1 .venv/bin/python bench/profile_kernels.py --train 64 --clock cpu

Builds the model as bench_models.py does (trace(symbolic=True, capture_as_const=True)),
runs its compiled graph through relay_bridge.profile.profile_run `--runs` times and
prints, per kernel name, the median (or min) over runs of its summed time in one run,
its share of the total and how often it is called; for the CPU rules' kernels also the
rate of useful work (the op's own flops, primfunc.mark: padding not counted, Winograd
credited with the direct count) and its share of this host's FMA peak, measured in the
same process (bench/fma_peak.py, times the TVM threads with --clock wall), and "work":
the arithmetic the kernel does as scheduled (TVM's TIR estimate: padded tile columns
and channels, the epilogue, Winograd's transforms) per useful flop ("-" where TVM
cannot estimate it: kernels with let-bound fast-math). So a kernel below the goal
says whether it runs slowly (low %peak) or does more than the op needs (work > 1).
On a loaded machine use
TVM_NUM_THREADS=1 --clock cpu (process CPU time). `--train IMAGE` profiles
bench_training.py's traced ResNet-18 training step instead (batch --batch, default 32;
IMAGE x IMAGE inputs), run on the parameters and optimizer state of its third call.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]


def kernel_flops(compiled) -> dict[str, tuple[int, float | None]]:
    """{rule kernel name: (useful flops per call, TIR-estimated flops or None)}, from
    lowering the compiled graph again (the same names: the lowering is deterministic)."""
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu.primfunc import FLOPS_ATTR
    from megtrace.relay_bridge.pipelines import lower_graph
    t = tvm()
    estimate = t.s_tir.analysis.estimate_tir_flops
    out: dict[str, tuple[int, float | None]] = {}

    def on_kernel(name: str, func) -> None:
        useful = func.attrs.get(FLOPS_ATTR) if func.attrs is not None else None
        if useful is None:
            return
        try:
            work = float(estimate(t.IRModule({"main": func})))
        except Exception:            # noqa: BLE001 (TVM: "no default for prim.Let")
            work = None
        out[name] = (int(useful), work)
    lower_graph(compiled.graph, compiled.target, "rules", on_kernel=on_kernel)
    return out


def kernel_times(report: dict) -> dict[str, tuple[float, int]]:
    """{kernel name: (ms summed over its calls, calls)} of one profile_run report."""
    out: dict[str, tuple[float, int]] = {}
    for per in report["profiler"]["device"].values():
        for r in per.values():
            ms, n = out.get(r["name"], (0.0, 0))
            out[r["name"]] = (ms + (r["end"] - r["start"]) * 1e3, n + 1)
    return out


class _Capture:
    """Stands in for a trace's compiled graph to keep the arrays of its next call."""

    def __init__(self, compiled):
        self.compiled, self.arrays = compiled, None

    def __call__(self, *arrays):
        self.arrays = list(arrays)
        return self.compiled(*arrays)


def inference(model: str, batch: int):
    """(compiled graph, its input arrays) of a bench model's inference."""
    import megtrace as mge
    import nets
    from megtrace.jit import trace
    net = nets.build(model)
    x = np.random.RandomState(0).standard_normal(
        nets.MODELS[model].shape(batch)).astype("float32")

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    infer(mge.tensor(x))
    return next(iter(infer._entries.values())).compiled[1], [x]


def training_step(batch: int, image: int):
    """(compiled graph, its input arrays) of bench_training.py's traced step."""
    import bench_training
    run = bench_training.traced_step("megtrace", batch, image)
    run()
    run()
    entry = next(iter(run.traced._entries.values()))
    graph, compiled = entry.compiled
    entry.compiled = (graph, _Capture(compiled))
    run()
    arrays = entry.compiled[1].arrays
    entry.compiled = (graph, compiled)
    return compiled, arrays


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="encoder")
    ap.add_argument("--batch", type=int, default=None, help="default 1 (32 with --train)")
    ap.add_argument("--train", type=int, default=None, metavar="IMAGE",
                    help="profile the ResNet-18 training step on IMAGE x IMAGE inputs")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: process CPU time (use with TVM_NUM_THREADS=1 on a loaded machine)")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="min is steadier on a machine other processes load")
    args = ap.parse_args()

    from megtrace.relay_bridge.profile import profile_run
    if args.train is not None:
        args.batch = args.batch or 32
        args.model = f"resnet18 training step {args.train}x{args.train},"
        compiled, arrays = training_step(args.batch, args.train)
    else:
        args.batch = args.batch or 1
        compiled, arrays = inference(args.model, args.batch)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    for _ in range(3):
        profile_run(compiled, arrays, clock)
    runs = []
    for _ in range(args.runs):
        runs.append(kernel_times(profile_run(compiled, arrays, clock)[1]))
    names = runs[0].keys()
    stat = statistics.median if args.stat == "median" else min
    med = {n: stat(r[n][0] for r in runs) for n in names}
    total = sum(med.values())
    flops = kernel_flops(compiled)
    from fma_peak import fma_peak_gflops
    from megtrace.relay_bridge._tvm import tvm
    threads = tvm().runtime.num_threads()
    # CPU time sums the threads: its rate is per thread
    peak = fma_peak_gflops() * (threads if args.clock == "wall" else 1)
    useful = sum(flops[n][0] * runs[0][n][1] for n in names if n in flops)
    print(f"{args.model} b{args.batch}: sum of per-kernel {args.stat}s {total:.3f} ms "
          f"({args.runs} runs); rule kernels' useful work {useful / 1e9:.3f} GFLOP, "
          f"{useful / total / 1e6:.1f} GFLOP/s over all kernels = "
          f"{100 * useful / total / 1e6 / peak:.0f}% of the FMA peak "
          f"({peak:.1f} GFLOP/s: {threads} TVM threads, {args.clock} clock)")
    print(f"{'ms':>8s} {'share':>6s} {'calls':5s} {'GFLOP/s':>8s} {'%peak':>5s} {'work':>5s}  kernel")
    for n in sorted(names, key=lambda k: -med[k])[:args.top]:
        calls = runs[0][n][1]
        rate = peak_share = work = "-"
        if n in flops:
            f, est = flops[n]
            gflops = f * calls / med[n] / 1e6
            rate, peak_share = f"{gflops:.1f}", f"{100 * gflops / peak:.0f}"
            work = "-" if est is None else f"{est / f:.2f}"
        print(f"{med[n]:8.3f} {100 * med[n] / total:5.1f}% x{calls:<4d} {rate:>8s} "
              f"{peak_share:>5s} {work:>5s}  {n}")


if __name__ == "__main__":
    main()
