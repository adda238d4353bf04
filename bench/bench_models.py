"""megtrace against MegEngine Lite 1.13, PyTorch eager, torch.compile (Inductor),
ONNX Runtime and OpenVINO (not a test).

    .venv/bin/python bench/bench_models.py [--quick] [--models mlp,resnet18]
                                           [--batches 1,8] [--threads 1,2]
                                           [--runtimes megtrace,openvino,...]
                                           [--out PREFIX] [--tune-trials 16]
    .venv/bin/python bench/bench_models.py --prepare-bench-env   # the peers' venv

For every model, batch and thread count, medians of: megtrace as a user calls it (a
function decorated with `trace(symbolic=True, capture_as_const=True)`: the default,
replaying `__call__`, and the same with `without_host=True`, timed alternately in one
process), MegEngine Lite on the .mge megtrace dumped, and the peers on the same weights
(torch twins in bench/torch_models.py; ONNX Runtime and OpenVINO read the ONNX file
exported from them; torch.compile with freezing). Each runtime's time divided by
megtrace's default call (>1: megtrace is faster); the best of ONNX Runtime and OpenVINO
against both megtrace paths; megtrace's GFLOP/s (default call) and its share of the
FMA peak of the threads used (measured per thread by the megtrace worker, fma_peak.py:
~230 GFLOP/s on the Xeon host, ~116 on a Zen 4; AMX GEMMs can pass it); the first call's seconds (record + build, or a compile-cache hit); the
largest relative difference of any runtime's output from megtrace's. A peer that is
not installed shows "n/a" and never fails the run. Last, the per-call overhead of a
tiny traced MLP on the without_host=True and the replay paths.

--out PREFIX also writes PREFIX.json (every figure) and PREFIX.md (the table).

--tune-trials N (N > 0) adds two columns: per model, batch and thread count,
megtrace.relay_bridge.tuning.tune (N trials per task, in its own process, records in
<work dir>/tune-<model>-b<batch>) and then compile_tuned timed on the VM: "tuned ms"
with megtrace's without_host time divided by it (>1: tuning helped), and "tune s".
bench/bench_tuning.py sets tuning against the CPU rules kernel by kernel.

Every runtime runs in its own process with the same thread count (thread pools cannot
be resized once started, and an idle pool spinning on 2 vCPUs slows the next runtime).
The peers run in a separate environment (--bench-python; default
~/.cache/megtrace/bench-venv, else this Python), because `import tvm` imports torch
whenever torch is installed, which would cost every TVM process ~2 s. --quick: batch 1
and 2 threads only, shorter timings.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT), str(ROOT / "tests")]

from bench_common import parse  # noqa: E402

PEERS = ("lite", "torch", "inductor", "onnxruntime", "openvino")
RUNTIMES = ("megtrace",) + PEERS
BENCH_ENV = Path.home() / ".cache" / "megtrace" / "bench-venv"
# the same packages as pyproject's `bench` extra
BENCH_PACKAGES = ["torch==2.13.0", "onnxruntime", "onnx", "openvino", "numpy"]


def prepare_bench_env() -> Path:
    """A virtualenv with torch, onnxruntime and onnx, outside the repository."""
    py = BENCH_ENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_ENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", *BENCH_PACKAGES], check=True)
    return py


def busy_cpus(seconds: float = 1.0) -> float:
    """How many CPUs other processes kept busy over `seconds` (from /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
        return sum(vals), vals[3] + vals[4]           # total, idle + iowait
    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
    except OSError:
        return 0.0
    return (1 - (i1 - i0) / max(t1 - t0, 1)) * (os.cpu_count() or 1)


def bench_python(given: str | None) -> str:
    """The Python the peers run in: --bench-python, $MEGTRACE_BENCH_PYTHON, the bench
    venv, else this one (then the peers not installed here show as n/a)."""
    for cand in (given, os.environ.get("MEGTRACE_BENCH_PYTHON"),
                 str(BENCH_ENV / "bin" / "python")):
        if cand and Path(cand).exists():
            return cand
    return sys.executable


def prepare(name: str, batch: int, folder: Path) -> dict[str, Path]:
    """Weights, input and .mge of one model at one batch (traced record-only here, so
    this process never starts TVM's thread pool)."""
    import megtrace as mge
    import nets
    from megtrace.jit import trace
    folder.mkdir(parents=True, exist_ok=True)
    files = {k: folder / v for k, v in (("model_file", "model.mge"), ("state", "state.npz"),
                                         ("inputs", "inputs.npz"), ("library", "megtrace.so"),
                                         ("onnx", "model.onnx"))}
    if files["model_file"].is_file():
        return files
    net = nets.build(name)
    x = np.random.default_rng(1).standard_normal(nets.MODELS[name].shape(batch)
                                                  ).astype(np.float32)
    np.savez(files["state"], **{k: np.asarray(v) for k, v in net.state_dict().items()})
    np.savez(files["inputs"], data=x)
    f = trace(lambda data: net(data), record_only=True)
    f(mge.tensor(x))
    f.dump(files["model_file"], arg_names=["data"], output_names=["out"])
    return files


def run_worker(python: str, script: str, cfg: dict, threads: int, timeout: float) -> dict:
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               TVM_FFI_DISABLE_TORCH_C_DLPACK="1")
    try:
        proc = subprocess.run([python, str(HERE / script), json.dumps(cfg, default=str)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    result = parse(proc.stdout)
    if result is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)[-300:]}"}
    return result


def rel_err(path: Path, ref: Path) -> float | None:
    if not path.is_file() or not ref.is_file():
        return None
    got, want = np.load(path).astype(np.float64), np.load(ref).astype(np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def bench_case(name, batch, threads, files, args, pythons) -> dict:
    out = {"model": name, "batch": batch, "threads": threads}
    cfg = dict(files, min_time=args.min_time)
    ref = files["model_file"].with_name(f"out_megtrace_t{threads}.npy")
    for rt in args.runtimes:
        res_file = files["model_file"].with_name(f"out_{rt}_t{threads}.npy")
        res_file.unlink(missing_ok=True)
        if rt == "megtrace":
            r = run_worker(sys.executable, "worker_megtrace.py",
                           dict(cfg, mode="trace", model=name, out=res_file),
                           threads, args.timeout)
        elif rt == "lite":
            import lite_runtime
            if not lite_runtime.is_prepared():
                r = {"missing": "MegEngine Lite (python tests/lite_runtime.py --prepare)"}
            else:
                r = run_worker(sys.executable, "worker_lite.py",
                               dict(cfg, out=res_file, lite_dir=lite_runtime.CACHE,
                                    threads=threads), threads, args.timeout)
        else:
            r = run_worker(pythons["bench"], "worker_torch.py",
                           dict(cfg, out=res_file, kind=rt, model=name, threads=threads),
                           threads, args.timeout)
        if rt != "megtrace":
            r["err"] = rel_err(res_file, ref)
        out[rt] = r
        time.sleep(0.2)
    if args.tune_trials:
        out.update(tune_case(name, batch, threads, files, args))
    return out


def tune_case(name, batch, threads, files, args) -> dict:
    """MetaSchedule tuning in one process, then the tuned build timed in another."""
    tune_dir = Path(args.work_dir_path) / f"tune-{name}-b{batch}"
    cfg = dict(files, min_time=args.min_time, target="llvm", tune_dir=tune_dir,
               threads=threads, trials=args.tune_trials)
    tuned = run_worker(sys.executable, "worker_megtrace.py", dict(cfg, mode="tune"),
                       threads, args.tune_timeout)
    if "error" in tuned:
        return {"tune": tuned, "tuned": {"error": "tuning failed"}}
    time.sleep(0.2)
    res_file = files["model_file"].with_name(f"out_tuned_t{threads}.npy")
    r = run_worker(sys.executable, "worker_megtrace.py",
                   dict(cfg, mode="tuned", out=res_file), threads, args.timeout)
    r["err"] = rel_err(res_file, files["model_file"].with_name(f"out_megtrace_t{threads}.npy"))
    return {"tune": tuned, "tuned": r}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="batch 1, 2 threads, short timings")
    ap.add_argument("--models", default=",".join(["mlp", "resnet18", "mobilenetv2", "encoder"]))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds timed per case")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="per worker (torch.compile's first build takes minutes)")
    ap.add_argument("--work-dir", default=None, help="keep models/weights/outputs here")
    ap.add_argument("--out", default=None, help="also write OUT.json and OUT.md")
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)   # older name
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="table of wall-clock or of process CPU time per call (cpu: "
                         "comparable on a loaded machine, for one thread only)")
    ap.add_argument("--render", nargs="+", default=None, metavar="JSON",
                    help="print earlier runs' --out JSON files (with --clock) and exit")
    ap.add_argument("--no-overhead", action="store_true",
                    help="skip the tiny-MLP call-overhead line")
    ap.add_argument("--tune-trials", type=int, default=0,
                    help="also tune each model (trials per task) and time the tuned build; "
                         "0: no tuning")
    ap.add_argument("--tune-timeout", type=float, default=3600.0,
                    help="per tuning worker")
    ap.add_argument("--bench-python", default=None,
                    help="a Python with the peers (torch, onnxruntime, openvino)")
    ap.add_argument("--prepare-bench-env", action="store_true",
                    help=f"create {BENCH_ENV} with {' '.join(BENCH_PACKAGES)} and exit")
    args = ap.parse_args(argv)
    if args.tune_trials < 0:
        ap.error("--tune-trials: expected 0 (no tuning) or a positive number of trials")
    if args.prepare_bench_env:
        print(f"bench environment ready: {prepare_bench_env()}")
        return 0
    if args.render:
        import bench_report
        for path in args.render:
            report = bench_report.load(Path(path), args.clock)
            report.print()
            if args.out:
                report.write(Path(args.out))
        return 0
    if args.quick:
        args.batches, args.threads, args.min_time = "1", "2", min(args.min_time, 0.4)
    import nets
    from bench_report import Report
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in nets.MODELS:
            ap.error(f"--models: unknown {m!r}; known: {sorted(nets.MODELS)}")
    args.runtimes = [r for r in args.runtimes.split(",") if r]
    unknown = [r for r in args.runtimes if r not in RUNTIMES]
    if unknown:
        ap.error(f"--runtimes: unknown {unknown}; known: {list(RUNTIMES)}")
    if "megtrace" not in args.runtimes:
        ap.error("--runtimes: megtrace is the reference and must be included")
    batches = [int(b) for b in args.batches.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    pythons = {"bench": bench_python(args.bench_python)}
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="mt-bench-"))
    args.work_dir_path = work
    report = Report([r for r in RUNTIMES if r in args.runtimes], tuning=args.tune_trials > 0,
                    clock=args.clock)
    report.say(f"megtrace benchmark: {os.cpu_count()} CPUs; peers' python: "
               f"{pythons['bench']}; files in {work}")
    busy = busy_cpus()
    if busy > 0.3:
        report.say(f"note: other processes keep {busy:.1f} CPUs busy (load average "
                   f"{os.getloadavg()[0]:.1f}): the timings will be noisy")
    start = time.perf_counter()
    for name in models:
        for batch in batches:
            files = prepare(name, batch, work / f"{name}_b{batch}")
            for threads in thread_counts:
                report.add(bench_case(name, batch, threads, files, args, pythons))
    if not args.no_overhead:
        report.overhead = run_worker(sys.executable, "worker_megtrace.py",
                                     {"mode": "overhead", "min_time": args.min_time},
                                     max(thread_counts), args.timeout)
    report.seconds = time.perf_counter() - start
    report.load = os.getloadavg()
    report.print()
    prefix = args.out or (args.json and str(Path(args.json).with_suffix("")))
    if prefix:
        report.write(Path(prefix))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
