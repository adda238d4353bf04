"""megtrace against MegEngine Lite 1.13, PyTorch eager and ONNX Runtime (not a test).

    .venv/bin/python bench/bench_models.py [--quick] [--models mlp,resnet18]
                                           [--batches 1,8] [--threads 1,2]
                                           [--tune-trials 16]
    .venv/bin/python bench/bench_models.py --prepare-bench-env   # torch + onnxruntime

For every model, batch and thread count: the median latency of megtrace
(compile_graph, whatever CPU rules exist), of MegEngine Lite on the .mge megtrace
dumped, of PyTorch eager and of ONNX Runtime on the same weights (torch twins in
bench/torch_models.py; ONNX exported from them); each one's time divided by
megtrace's (>1: megtrace is faster); megtrace's GFLOP/s and its share of 230 GFLOP/s
(2-core AVX-512 FMA peak); megtrace's build time and peak memory; the largest
relative difference of each runtime's output from megtrace's. Last, the per-call
overhead of a tiny traced MLP on the without_host=True and the replay paths.

--tune-trials N (N > 0) adds two columns: per model, batch and thread count,
megtrace.relay_bridge.tuning.tune (N trials per task, in its own process, records in
<work dir>/tune-<model>-b<batch>) and then compile_tuned timed like megtrace:
"tuned ms" with megtrace's (rules only) time divided by it (>1: tuning helped), and
"tune s", the time tuning took.

Every runtime runs in its own process (thread pools cannot be resized once started,
and an idle pool spinning on 2 vCPUs slows the next runtime). torch and ONNX Runtime
run in a separate environment (--bench-python; default ~/.cache/megtrace/bench-venv),
because `import tvm` imports torch whenever torch is installed, which would cost
every TVM process ~2 s. --quick: batch 1 and 2 threads only, shorter timings (< 3 min).
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

PEAK = 230.0
RUNTIMES = ("megtrace", "lite", "torch", "onnxruntime")
BENCH_ENV = Path.home() / ".cache" / "megtrace" / "bench-venv"
BENCH_PACKAGES = ["torch==2.13.0", "onnxruntime", "onnx", "numpy"]


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


def bench_python(given: str | None) -> str | None:
    for cand in (given, os.environ.get("MEGTRACE_BENCH_PYTHON"),
                 str(BENCH_ENV / "bin" / "python")):
        if cand and Path(cand).exists():
            return cand
    return None


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
    for rt in args.runtimes:
        res_file = files["model_file"].with_name(f"out_{rt}_t{threads}.npy")
        if rt == "megtrace":
            r = run_worker(sys.executable, "worker_megtrace.py", dict(cfg, out=res_file),
                           threads, args.timeout)
        elif rt == "lite":
            import lite_runtime
            if not lite_runtime.is_prepared():
                r = {"error": "Lite not prepared (python tests/lite_runtime.py --prepare)"}
            else:
                r = run_worker(sys.executable, "worker_lite.py",
                               dict(cfg, out=res_file, lite_dir=lite_runtime.CACHE,
                                    threads=threads), threads, args.timeout)
        else:
            if pythons["bench"] is None:
                r = {"error": "no torch environment (--prepare-bench-env)"}
            else:
                r = run_worker(pythons["bench"], "worker_torch.py",
                               dict(cfg, out=res_file, kind=rt, model=name, threads=threads),
                               threads, args.timeout)
        ref = files["model_file"].with_name(f"out_megtrace_t{threads}.npy")
        r["err"] = rel_err(res_file, ref) if rt != "megtrace" else 0.0
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


def fmt_row(row: dict, tune: bool = False) -> str:
    def ms(rt):
        r = row.get(rt, {})
        return "err" if "error" in r else (f"{r['median_ms']:.3f}" if "median_ms" in r else "-")

    mt = row.get("megtrace", {})
    base = mt.get("median_ms")
    cells = [f"{row['model']:<12}", f"{row['batch']:>2}", f"{row['threads']:>2}",
             f"{ms('megtrace'):>9}"]
    flops = row.get("flops")
    if base and flops:
        gf = flops / (base * 1e-3) / 1e9
        cells += [f"{gf:7.1f}", f"{100 * gf / PEAK:5.1f}%"]
    else:
        cells += [f"{'-':>7}", f"{'-':>6}"]
    for rt in ("lite", "torch", "onnxruntime"):
        r = row.get(rt, {})
        ratio = f"{r['median_ms'] / base:.2f}x" if base and "median_ms" in r else "-"
        cells += [f"{ms(rt):>9}", f"{ratio:>7}"]
    if tune:
        r = row.get("tuned", {})
        cell = ms("tuned")
        if base and "median_ms" in r:
            cell += f" ({base / r['median_ms']:.2f}x)"
        ts = row.get("tune", {}).get("tune_s")
        cells += [f"{cell:>22}", f"{'err' if ts is None else f'{ts:.0f}':>6}"]
    errs = [row.get(rt, {}).get("err") for rt in ("lite", "torch", "onnxruntime", "tuned")]
    worst = max((e for e in errs if e is not None), default=None)
    cells += [f"{row.get('build_s', '-'):>7}", f"{row.get('build_peak_mb', '-'):>8}",
              f"{worst:.1e}" if worst is not None else "-"]
    return " ".join(cells)


def header(tune: bool = False) -> str:
    tuned = f"{'tuned ms (rules/tuned)':>22} {'tune s':>6} " if tune else ""
    return (f"{'model':<12} {'b':>2} {'t':>2} {'mt ms':>9} {'GFLOP/s':>7} {'%peak':>6} "
            f"{'lite ms':>9} {'/mt':>7} {'torch ms':>9} {'/mt':>7} {'ort ms':>9} {'/mt':>7} "
            f"{tuned}{'build s':>7} {'peak MB':>8} {'max err'}")


HEADER = header()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="batch 1, 2 threads, short timings")
    ap.add_argument("--models", default=",".join(["mlp", "resnet18", "mobilenetv2", "encoder"]))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds timed per case")
    ap.add_argument("--timeout", type=float, default=600.0, help="per worker")
    ap.add_argument("--work-dir", default=None, help="keep models/weights/outputs here")
    ap.add_argument("--json", default=None, help="also write every result here")
    ap.add_argument("--tune-trials", type=int, default=0,
                    help="also tune each model (trials per task) and time the tuned build; "
                         "0: no tuning")
    ap.add_argument("--tune-timeout", type=float, default=3600.0,
                    help="per tuning worker")
    ap.add_argument("--bench-python", default=None,
                    help="a Python with torch and onnxruntime")
    ap.add_argument("--prepare-bench-env", action="store_true",
                    help=f"create {BENCH_ENV} with {' '.join(BENCH_PACKAGES)} and exit")
    args = ap.parse_args(argv)
    if args.tune_trials < 0:
        ap.error("--tune-trials: expected 0 (no tuning) or a positive number of trials")
    if args.prepare_bench_env:
        print(f"bench environment ready: {prepare_bench_env()}")
        return 0
    if args.quick:
        args.batches, args.threads, args.min_time = "1", "2", min(args.min_time, 0.4)
    import nets
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in nets.MODELS:
            ap.error(f"--models: unknown {m!r}; known: {sorted(nets.MODELS)}")
    args.runtimes = [r for r in args.runtimes.split(",") if r]
    if "megtrace" not in args.runtimes:
        ap.error("--runtimes: megtrace is the reference and must be included")
    batches = [int(b) for b in args.batches.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    pythons = {"bench": bench_python(args.bench_python)}
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="mt-bench-"))
    args.work_dir_path = work
    print(f"megtrace benchmark: {os.cpu_count()} CPUs, peak {PEAK:.0f} GFLOP/s; torch/ORT "
          f"python: {pythons['bench'] or 'none'}; files in {work}", flush=True)
    busy = busy_cpus()
    if busy > 0.3:
        print(f"note: other processes keep {busy:.1f} CPUs busy: the timings will be noisy",
              flush=True)
    start = time.perf_counter()
    rows = []
    tuning = args.tune_trials > 0
    if tuning:
        print(f"tuning: {args.tune_trials} trials per task; 'tuned ms (rules/tuned)': "
              f"compile_tuned's latency and megtrace's (rules only) divided by it; "
              f"'tune s': tuning time", flush=True)
    print(header(tuning), flush=True)
    for name in models:
        for batch in batches:
            files = prepare(name, batch, work / f"{name}_b{batch}")
            for threads in thread_counts:
                row = bench_case(name, batch, threads, files, args, pythons)
                first = next((r for r in rows if r["model"] == name and r["batch"] == batch),
                             None)
                mt = row["megtrace"]
                for key in ("flops", "build_s", "build_peak_mb", "pipeline"):
                    row[key] = mt.get(key, first.get(key) if first else None)
                rows.append(row)
                print(fmt_row(row, tuning), flush=True)
    for row in rows:
        for rt in args.runtimes + (["tune", "tuned"] if tuning else []):
            if "error" in row.get(rt, {}):
                print(f"  {row['model']} b{row['batch']} t{row['threads']} {rt}: "
                      f"{row[rt]['error']}")
    for row in rows if tuning else []:
        t = row.get("tune", {})
        if "error" not in t:
            print(f"  {row['model']} b{row['batch']} t{row['threads']} tuning: "
                  f"{t.get('tasks')} tasks, {t.get('total_trials')} trials, "
                  f"{t.get('kept')} records kept" + (f"; {t['note']}" if t.get("note") else ""))
    over = run_worker(sys.executable, "worker_megtrace.py",
                      {"mode": "overhead", "min_time": args.min_time}, max(thread_counts),
                      args.timeout)
    if "call_us" in over:
        c = over["call_us"]
        print(f"__call__ of a tiny traced MLP (64-128-64-10, batch 1), us per call: VM alone "
              f"{c['vm']:.1f}; CompiledGraph {c['compiled_graph']:.1f}; trace "
              f"without_host=True {c['trace_without_host']:.1f} (+"
              f"{c['trace_without_host'] - c['vm']:.1f}); replay {c['trace_replay']:.1f} "
              f"(+{c['trace_replay'] - c['vm']:.1f})")
    else:
        print(f"__call__ overhead: {over.get('error')}")
    print(f"total {time.perf_counter() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "overhead": over}, indent=1,
                                              default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
