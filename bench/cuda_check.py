"""Build models for CUDA (sm_80, sm_90); run and compare with NumPy when a GPU is here,
otherwise check what can be checked without one (not a test).

    .venv/bin/python bench/cuda_check.py [--models mlp,convnet,encoder] [--arch sm_80,sm_90]

Without a GPU: TVM generates CUDA C (the build itself needs no GPU), nvcc compiles it
to PTX for each arch (when nvcc is on PATH), and the library exports. With a GPU: the
library runs on it and its outputs are compared with megtrace's NumPy eager results.
Prints one line per step, so the log says exactly what was and was not checked.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _models():
    import zoo
    from models import MLP, ConvNet
    return {"mlp": (MLP, (8, 64)), "convnet": (ConvNet, (2, 3, 32, 32)),
            "encoder": (lambda: zoo.EncoderBlock(256, 4, 1024), (2, 64, 256))}


def gpu_present() -> bool:
    from megtrace.relay_bridge._tvm import tvm
    try:
        return bool(tvm().cuda(0).exist)
    except Exception:         # a CPU-only TVM runtime has no CUDA device API at all
        return False


def check(name: str, arch: str, work: Path, has_gpu: bool) -> bool:
    import megtrace as mge
    from megtrace.jit import trace
    from megtrace.relay_bridge.cross import compile_cuda, cuda_source
    from megtrace.relay_bridge.executable import build_executable
    from megtrace.relay_bridge.export import export
    from megtrace.relay_bridge.targets import resolve

    make, shape = _models()[name]
    net = make().eval()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    f = trace(lambda d: net(d), record_only=True)
    f(mge.tensor(x))
    target = resolve({"kind": "cuda", "arch": arch})
    tag = f"{name} {arch}:"
    start = time.perf_counter()
    built = build_executable(f.graph, target)
    src = cuda_source(built.executable)
    print(f"{tag} built in {time.perf_counter() - start:.1f} s ({built.pipeline} pipeline); "
          f"{src.count('__global__')} CUDA kernels, {len(src)} chars of CUDA C")
    if shutil.which("nvcc"):
        start = time.perf_counter()
        ptx = compile_cuda(src, target, "ptx")
        arch_ok = f".target {arch}" in ptx.decode(errors="replace")
        print(f"{tag} nvcc -> PTX {len(ptx)} bytes in {time.perf_counter() - start:.1f} s "
              f"(.target {arch}: {'yes' if arch_ok else 'NO'})")
        if not arch_ok:
            return False
    else:
        print(f"{tag} PTX not checked: nvcc is not on PATH")
    lib = work / f"{name}_{arch}.so"
    export(f.graph, lib, target)
    print(f"{tag} exported {lib.name} ({lib.stat().st_size // 1024} KiB)")
    if not has_gpu:
        print(f"{tag} not run: no CUDA GPU on this machine")
        return True
    from megtrace.relay_bridge.export import load_exported
    os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")
    got = load_exported(lib)(x)[0]
    want = net(mge.tensor(x)).numpy()
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    ok = err <= 1e-4
    print(f"{tag} ran on the GPU: max relative error vs NumPy {err:.1e} "
          f"({'ok' if ok else 'TOO LARGE'})")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,convnet,encoder")
    ap.add_argument("--arch", default="sm_80,sm_90")
    args = ap.parse_args(argv)
    has_gpu = gpu_present()
    print(f"CUDA GPU present: {has_gpu}; nvcc: {shutil.which('nvcc') or 'none'}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="mt-cuda-") as tmp:
        for name in args.models.split(","):
            for arch in args.arch.split(","):
                ok &= check(name, arch, Path(tmp), has_gpu)
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
