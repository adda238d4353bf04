"""Peak memory of a training step with and without megtrace's memory options.

Each row is one fresh process (this script with --worker), so figures do not mix:
- traced: one `@trace(symbolic=True)` training step (forward, backward, SGD update) as
  TVM builds it, plain / `sublinear_memory_config=SublinearMemoryConfig()` /
  `dtr_config=DTRConfig(eviction_threshold=a quarter of the activations)`; one compiled
  run with TVM's naive allocator (megtrace.relay_bridge.memory.peak_run_memory):
  "step peak" is the step's activation memory, the resident set's peak during the run
  minus what was resident before it (parameters, optimizer state, inputs: "state"), so
  it holds the activations, gradients, temporaries and whatever new outputs the step
  allocates (with a memory option the new parameters and momenta are written over the
  old ones, relay_bridge/donate.py, and allocate nothing); "process peak" is the whole
  process's resident-set peak during the run (Python, TVM, kernels, state included).
  Next to them the planner's simulated peak (donated outputs not counted);
- eager: the same step on NumPy, plain / `megtrace.dtr` with eviction_threshold the size
  of the activations (the gradient tape holds about three times that: every op's inputs
  and outputs; far lower budgets work too but recompute quadratically, as DTR does);
  memory is tracemalloc's peak of the step (NumPy buffers).
Step times are medians of a few calls (noisy on a loaded machine; the point is memory).

    python bench/bench_memory.py [--models mlp20,cnn] [--out bench_memory]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from bench_common import RESULT, parse  # noqa: E402

MODELS = {
    # name: (description, batch, activation bytes the backward pass keeps without recompute)
    "mlp20": ("MLP 20 x Linear(256) + ReLU", 4096, 20 * 4096 * 256 * 4),
    "cnn": ("CNN 8 x Conv3x3(32) + ReLU, 32x32", 32, 8 * 32 * 32 * 32 * 32 * 4),
    # tests/zoo.py's ResNet-18 (1000 classes, BatchNorm in training mode), 128x128 images:
    # ~300 MiB of conv, BatchNorm and ReLU outputs. At 64x64 (~75 MiB) the step's peak is
    # in the update instead (all gradients, 45 MiB, with the new weights and momenta,
    # 90 MiB), which no recomputation lowers.
    "resnet18": ("ResNet-18, 128x128", 32, 32 * 4 * 4 * 3 * (
        64 * 32 * 32 + 64 * 16 * 16 * 4 + 128 * 8 * 8 * 5 + 256 * 4 * 4 * 5
        + 512 * 2 * 2 * 5)),
    "resnet18_64": ("ResNet-18, 64x64", 32, 32 * 4 * 3 * (
        64 * 32 * 32 + 64 * 16 * 16 * 4 + 128 * 8 * 8 * 5 + 256 * 4 * 4 * 5
        + 512 * 2 * 2 * 5)),
}
TRACED = ("plain", "sublinear", "dtr")
EAGER = ("plain", "dtr")


def _model(name: str):
    import numpy as np
    import megtrace.functional as F
    import megtrace.module as M
    import zoo

    class MLP(M.Module):
        def __init__(self):
            super().__init__()
            self.layers = [M.Linear(256, 256) for _ in range(20)]
            self.head = M.Linear(256, 10)

        def forward(self, x):
            for layer in self.layers:
                x = F.relu(layer(x))
            return self.head(x)

    class CNN(M.Module):
        def __init__(self):
            super().__init__()
            self.stem = M.Conv2d(3, 32, 3, padding=1)
            self.convs = [M.Conv2d(32, 32, 3, padding=1) for _ in range(7)]
            self.head = M.Linear(32, 10)

        def forward(self, x):
            x = F.relu(self.stem(x))
            for conv in self.convs:
                x = F.relu(conv(x))
            return self.head(F.mean(x, axis=[2, 3]))

    np.random.seed(0)              # module initializers draw from NumPy's global RNG
    rs = np.random.RandomState(0)
    batch = MODELS[name][1]
    if name.startswith("resnet18"):
        side = 64 if name == "resnet18_64" else 128
        net, shape, classes = zoo.ResNet18(num_classes=1000), (batch, 3, side, side), 1000
        net.train()
    else:
        net, classes = (MLP() if name == "mlp20" else CNN()), 10
        shape = (batch, 256) if name == "mlp20" else (batch, 3, 32, 32)
    x = rs.standard_normal(shape).astype("float32")
    label = rs.randint(0, classes, batch).astype("int32")
    return net, x, label


def _step_fn(net, trace_options=None):
    import megtrace.functional as F
    import megtrace.optimizer as optim
    from megtrace.autodiff import GradManager
    from megtrace.jit import trace
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step(x, label):
        with gm:
            loss = F.nn.cross_entropy(net(x), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss
    return step if trace_options is None else trace(step, symbolic=True, **trace_options)


def _median_time(fn, calls=3) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def worker_traced(name: str, mode: str) -> dict:
    import numpy as np
    import megtrace as mge
    from megtrace.jit import DTRConfig, SublinearMemoryConfig
    from megtrace.jit.sublinear import simulated_peak
    from megtrace.relay_bridge.memory import peak_run_memory
    net, x, label = _model(name)
    options = {}
    if mode == "sublinear":
        options = {"sublinear_memory_config": SublinearMemoryConfig()}
    elif mode == "dtr":
        options = {"dtr_config": DTRConfig(eviction_threshold=MODELS[name][2] // 4,
                                           evictee_minimum_size=1 << 16)}
    step = _step_fn(net, options)
    xs, ls = mge.tensor(x), mge.tensor(label)
    t0 = time.perf_counter()
    loss = float(step(xs, ls))
    first = time.perf_counter() - t0
    seconds = _median_time(lambda: float(step(xs, ls)))
    (entry,) = step._entries.values()
    graph, compiled = entry.compiled
    arrays = [np.zeros(v.type.shape, v.type.dtype) for v in graph.inputs]
    step_peak, process_peak = min(peak_run_memory(compiled, arrays) for _ in range(2))
    copies = sum(v.name_hint.endswith(":recompute") for n in graph.nodes for v in n.outputs)
    return {"peak_mb": step_peak / 2 ** 20, "process_peak_mb": process_peak / 2 ** 20,
            "state_mb": sum(a.nbytes for a in arrays) / 2 ** 20,
            "planned_mb": simulated_peak(graph, donated=bool(options)) / 2 ** 20,
            "step_ms": seconds * 1e3, "first_call_s": first, "loss": loss,
            "nodes": len(graph.nodes), "recomputed_values": copies}


def worker_eager(name: str, mode: str) -> dict:
    import tracemalloc
    import megtrace as mge
    from megtrace.dtr.pool import POOL
    net, x, label = _model(name)
    step = _step_fn(net)
    xs, ls = mge.tensor(x), mge.tensor(label)
    if mode == "dtr":
        mge.dtr.eviction_threshold = MODELS[name][2]
        mge.dtr.evictee_minimum_size = 1 << 16
        mge.dtr.enable()
    tracemalloc.start()
    peaks, times, losses = [], [], []
    for _ in range(3):
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        losses.append(float(step(xs, ls)))
        times.append(time.perf_counter() - t0)
        peaks.append(tracemalloc.get_traced_memory()[1])
    return {"peak_mb": max(peaks) / 2 ** 20, "step_ms": sorted(times)[1] * 1e3,
            "loss": losses[-1], "recomputations": POOL.recomputations,
            "note": "step time under tracemalloc"}


def run_case(kind: str, name: str, mode: str) -> dict:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536",
               PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, __file__, "--worker", kind, name, mode], env=env,
                          capture_output=True, text=True, timeout=1800)
    return parse(proc.stdout) or {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}


def report(rows: list[dict]) -> str:
    lines = ["| model | mode | option | step peak MiB | vs plain | process peak MiB | "
             "state MiB | planned MiB | step ms | recomputed | loss |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    plain = {(r["model"], r["kind"]): r.get("peak_mb") for r in rows if r["mode"] == "plain"}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['kind']} | {r['mode']} | error: {r['error']} "
                         "| | | | | | | |")
            continue
        base = plain.get((r["model"], r["kind"]))
        drop = f"{100 * (r['peak_mb'] / base - 1):+.0f}%" if base else ""
        recomputed = r.get("recomputed_values", r.get("recomputations", 0))
        planned = f"{r['planned_mb']:.1f}" if "planned_mb" in r else ""
        process = f"{r['process_peak_mb']:.0f}" if "process_peak_mb" in r else ""
        state = f"{r['state_mb']:.1f}" if "state_mb" in r else ""
        lines.append(f"| {MODELS[r['model']][0]} (batch {MODELS[r['model']][1]}) | "
                     f"{r['kind']} | {r['mode']} | {r['peak_mb']:.1f} | {drop} | {process} | "
                     f"{state} | {planned} | {r['step_ms']:.0f} | {recomputed} | "
                     f"{r['loss']:.5f} |")
    lines.append("")
    lines.append("traced step peak: the resident set's peak during one compiled run minus "
                 "what was resident before it (state: parameters, optimizer state, inputs); "
                 "eager: tracemalloc's peak of the step's NumPy buffers. process peak: the "
                 "whole process's resident-set peak during the run.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp20,cnn")
    ap.add_argument("--kinds", default="traced,eager")
    ap.add_argument("--modes", default=None, help="only these modes (e.g. plain,sublinear)")
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    ap.add_argument("--worker", nargs=3, metavar=("KIND", "MODEL", "MODE"))
    args = ap.parse_args()
    if args.worker:
        kind, name, mode = args.worker
        result = (worker_traced if kind == "traced" else worker_eager)(name, mode)
        print(RESULT + json.dumps(result), flush=True)
        return
    rows = []
    for name in args.models.split(","):
        for kind in args.kinds.split(","):
            for mode in (TRACED if kind == "traced" else EAGER):
                if args.modes and mode not in args.modes.split(","):
                    continue
                row = {"model": name, "kind": kind, "mode": mode, **run_case(kind, name, mode)}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    md = report(rows)
    print(md)
    if args.out:
        Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1))
        Path(args.out).with_suffix(".md").write_text(md + "\n")


if __name__ == "__main__":
    main()
