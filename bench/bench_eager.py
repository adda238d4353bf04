"""Eager megtrace against real MegEngine 1.13's eager mode (not a test).

    .venv/bin/python bench/bench_eager.py [--models resnet18,mobilenetv2] [--batch 1]
                                          [--rounds 3] [--megref ../shared/megref/mpy]

Both run the same model code (tests/zoo.py, written against MegEngine's API; MegEngine's
worker imports it with `megtrace` aliased to `megengine`) at 224x224 on one thread:
megtrace with OPENBLAS/OMP threads 1, MegEngine on device cpu0. Each worker is its own
process; the runtimes alternate for --rounds rounds and the best median of each is
reported, so a busy machine penalises both alike. Last column: MegEngine's time divided
by megtrace's (>1: megtrace is faster)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT), str(ROOT / "tests")]

from bench_common import RESULT, median_seconds, parse  # noqa: E402

# shared/ lies beside the checkout (or beside the folder of worktrees)
DEFAULT_MEGREF = next((p for p in (ROOT.parent / "shared" / "megref" / "mpy",
                                   ROOT.parent.parent / "shared" / "megref" / "mpy")
                       if p.exists()), ROOT.parent / "shared" / "megref" / "mpy")
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "TVM_NUM_THREADS": "1", "MGE_DEFAULT_DEVICE": "cpu0"}


def _alias_megengine_as_megtrace() -> None:
    import megengine
    import megengine.functional
    import megengine.module
    sys.modules.update({"megtrace": megengine, "megtrace.functional": megengine.functional,
                        "megtrace.module": megengine.module})


def worker(runtime: str, model: str, batch: int) -> None:
    import numpy as np
    if runtime == "megengine":
        _alias_megengine_as_megtrace()
    import megtrace as mge   # megengine itself in MegEngine's worker
    import zoo
    net = {"resnet18": zoo.ResNet18, "mobilenetv2": zoo.MobileNetV2}[model]()
    net.eval()
    x = mge.tensor(np.random.default_rng(0).random((batch, 3, 224, 224), np.float32))

    def run():
        net(x).numpy()

    seconds, iters = median_seconds(run, min_time=2.0, min_iters=5)
    print(RESULT + json.dumps({"ms": seconds * 1e3, "iters": iters}), flush=True)


def _measure(runtime: str, model: str, batch: int, megref: str) -> float:
    cmd = [sys.executable] if runtime == "megtrace" else [megref]
    cmd += [str(Path(__file__).resolve()), "--worker", runtime, "--models", model,
            "--batch", str(batch)]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **ONE_THREAD},
                          capture_output=True, text=True, timeout=600)
    result = parse(proc.stdout)
    if proc.returncode or result is None:
        raise RuntimeError(f"{runtime} worker failed on {model}:\n{proc.stderr[-2000:]}")
    return result["ms"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mobilenetv2")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--megref", default=os.environ.get("MEGREF_MPY", str(DEFAULT_MEGREF)))
    ap.add_argument("--worker", choices=("megtrace", "megengine"))
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.models, args.batch)
        return
    print(f"eager, batch {args.batch}, 224x224, 1 thread; best median of {args.rounds} rounds")
    print(f"{'model':<12} {'megtrace ms':>12} {'MegEngine ms':>13} {'MegEngine/megtrace':>19}")
    for model in args.models.split(","):
        best = {"megtrace": float("inf"), "megengine": float("inf")}
        for _ in range(args.rounds):
            for runtime in best:
                best[runtime] = min(best[runtime], _measure(runtime, model, args.batch,
                                                            args.megref))
        print(f"{model:<12} {best['megtrace']:>12.1f} {best['megengine']:>13.1f} "
              f"{best['megengine'] / best['megtrace']:>19.2f}", flush=True)


if __name__ == "__main__":
    main()
