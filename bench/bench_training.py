"""A ResNet-18 training step: megtrace traced vs real MegEngine 1.13 traced vs PyTorch
eager (not a test).

    .venv/bin/python bench/bench_training.py [--batch 32] [--image 224] [--rounds 2]
        [--steps 5] [--threads 1] [--clock wall|cpu] [--runtimes megtrace,megengine,torch]
        [--megref ../shared/megref/mpy] [--torch-python ~/.cache/megtrace/bench-venv/bin/python]

One step: forward, cross-entropy on 1000 classes, backward, SGD (momentum 0.9, weight
decay 1e-4) update, clear_grad. megtrace and MegEngine run the same model code
(tests/zoo.py; MegEngine's worker imports it with `megtrace` aliased to `megengine`) with
the whole step inside one `trace(symbolic=True)` (GradManager, optimizer and BatchNorm's
running statistics updated by the compiled step); PyTorch runs its twin
(bench/torch_models.py) eagerly. Every runtime is its own process on --threads threads;
they alternate for --rounds rounds and the best median step time of each is kept (a
busy machine penalises all alike). Reported: median step time after the warm-up steps
(the first traced call compiles) in wall-clock and in process CPU time (--clock picks
the one rounds and ratios use), the first call's time, and the worker's peak RSS (VmHWM). Prints the load average
before and after: quote it with the figures.
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
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT), str(ROOT / "tests")]

from bench_common import emit, median_wall_cpu, parse  # noqa: E402

DEFAULT_MEGREF = next((p for p in (ROOT.parent / "shared" / "megref" / "mpy",
                                   ROOT.parent.parent / "shared" / "megref" / "mpy")
                       if p.exists()), ROOT.parent / "shared" / "megref" / "mpy")
DEFAULT_TORCH = Path.home() / ".cache" / "megtrace" / "bench-venv" / "bin" / "python"
CLASSES = 1000
LR, MOMENTUM, WEIGHT_DECAY = 0.01, 0.9, 1e-4


def _batch(batch: int, image: int):
    import numpy as np
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, 3, image, image), dtype=np.float32),
            rng.integers(0, CLASSES, size=batch).astype(np.int32))


def _megengine_modules():
    """megengine under the names tests/zoo.py imports (megtrace.functional/module)."""
    import megengine
    import megengine.functional
    import megengine.module
    sys.modules.update({"megtrace": megengine, "megtrace.functional": megengine.functional,
                        "megtrace.module": megengine.module})
    from megengine.autodiff import GradManager
    from megengine.jit import trace
    return megengine, megengine.functional, megengine.optimizer, GradManager, trace


def _megtrace_modules():
    import megtrace
    import megtrace.functional
    import megtrace.optimizer
    from megtrace.autodiff import GradManager
    from megtrace.jit import trace
    return megtrace, megtrace.functional, megtrace.optimizer, GradManager, trace


def traced_step(runtime: str, batch: int, image: int):
    """The traced training step of megtrace or MegEngine (same code for both)."""
    mge, F, optim, GradManager, trace = (_megengine_modules() if runtime == "megengine"
                                         else _megtrace_modules())
    import zoo
    net = zoo.ResNet18(num_classes=CLASSES)
    net.train()
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)

    @trace(symbolic=True)
    def step(x, label):
        with gm:
            loss = F.nn.cross_entropy(net(x), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss
    x, label = (mge.tensor(a) for a in _batch(batch, image))

    def run() -> float:
        return float(step(x, label).numpy())
    run.traced = step               # the trace object (bench/profile_kernels.py --train)
    return run


def torch_step(batch: int, image: int):
    import torch
    import torch_models
    torch.manual_seed(0)
    net = torch_models.ResNet18(num_classes=CLASSES)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM,
                          weight_decay=WEIGHT_DECAY)
    x, label = (torch.from_numpy(a) for a in _batch(batch, image))
    label = label.long()

    def step():
        loss = torch.nn.functional.cross_entropy(net(x), label)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss)
    return step


def worker(runtime: str, batch: int, image: int, steps: int, threads: int) -> None:
    if runtime == "torch":
        import torch
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        step = torch_step(batch, image)
    else:
        step = traced_step(runtime, batch, image)
    start = time.perf_counter()
    first_loss = step()                       # a traced step compiles on this call
    first_s = time.perf_counter() - start
    wall, cpu, iters = median_wall_cpu(step, min_time=0.0, min_iters=steps, warmup=2)
    emit(ms=wall * 1e3, cpu_ms=cpu * 1e3, iters=iters, first_s=round(first_s, 2),
         first_loss=round(first_loss, 4))


def _thread_env(threads: int) -> dict[str, str]:
    n = str(threads)
    return {"OPENBLAS_NUM_THREADS": n, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n,
            "TVM_NUM_THREADS": n,
            "MGE_DEFAULT_DEVICE": "cpu0" if threads == 1 else f"multithread{threads}"}


def _measure(runtime: str, args) -> dict:
    python = {"megtrace": sys.executable, "megengine": args.megref,
              "torch": args.torch_python}[runtime]
    cmd = [python, str(Path(__file__).resolve()), "--worker", runtime,
           "--batch", str(args.batch), "--image", str(args.image),
           "--steps", str(args.steps), "--threads", str(args.threads)]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **_thread_env(args.threads)},
                          capture_output=True, text=True, timeout=args.timeout)
    result = parse(proc.stdout)
    if proc.returncode or result is None:
        return {"error": (proc.stderr or proc.stdout)[-1500:]}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--image", type=int, default=224,
                    help="image height and width (224 is slow on a small shared machine)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps after warm-up")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runtimes", default="megtrace,megengine,torch")
    ap.add_argument("--megref", default=os.environ.get("MEGREF_MPY", str(DEFAULT_MEGREF)))
    ap.add_argument("--torch-python", default=os.environ.get("MEGTRACE_BENCH_PYTHON",
                                                              str(DEFAULT_TORCH)))
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="rank rounds and compute ratios by wall-clock or by process CPU "
                         "time per step (cpu: steadier on a loaded machine with --threads 1)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--worker", choices=("megtrace", "megengine", "torch"))
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.batch, args.image, args.steps, args.threads)
        return
    runtimes = args.runtimes.split(",")
    print(f"ResNet-18 training step (SGD momentum), batch {args.batch}, "
          f"{args.image}x{args.image}, {args.threads} thread(s); median of {args.steps} "
          f"steps after warm-up, best of {args.rounds} rounds by {args.clock} time; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    best: dict[str, dict] = {}
    key = "cpu_ms" if args.clock == "cpu" else "ms"
    for _ in range(args.rounds):
        for runtime in runtimes:
            r = _measure(runtime, args)
            if "error" in r:
                print(f"{runtime}: failed\n{r['error']}", flush=True)
            elif runtime not in best or r[key] < best[runtime][key]:
                best[runtime] = r
    print(f"{'runtime':<20} {'step ms':>9} {'CPU ms':>9} {'first call s':>13} "
          f"{'peak RSS MiB':>13} {'megtrace speedup':>17}")
    ours = best.get("megtrace", {}).get(key)
    names = {"megtrace": "megtrace traced", "megengine": "MegEngine traced",
             "torch": "PyTorch eager"}
    for runtime in runtimes:
        r = best.get(runtime)
        if r is None:
            continue
        ratio = f"{r[key] / ours:.2f}x" if ours else "-"
        print(f"{names[runtime]:<20} {r['ms']:>9.1f} {r['cpu_ms']:>9.1f} {r['first_s']:>13.2f} "
              f"{r['peak_mb']:>13.0f} {ratio:>17}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
