"""Benchmark worker: a peer runtime on the same weights — PyTorch eager, torch.compile
(Inductor), ONNX Runtime or OpenVINO (run with a Python that has them; see
bench_models.py --prepare-bench-env).

    python worker_torch.py '{"kind": "torch" | "inductor" | "onnxruntime" | "openvino",
                             "model": "resnet18", "state": ..., "inputs": ..., "out": ...,
                             "onnx": ..., "threads": 2, "min_time": 1.0}'

The ONNX file is exported from the torch twin once (TorchScript exporter, opset 17)
and reused by later runs; OpenVINO reads the same file. A runtime that is not
installed gives {"missing": "<package>"}, never a failure.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_common import emit, median_wall_cpu  # noqa: E402


PACKAGES = {"torch": "torch", "inductor": "torch", "onnxruntime": "onnxruntime",
            "openvino": "openvino"}


def _torch_model(cfg: dict, x: np.ndarray):
    import torch
    torch.set_num_threads(int(cfg["threads"]))
    torch.set_num_interop_threads(1)
    import torch_models
    with np.load(cfg["state"]) as data:
        state = {k: data[k] for k in data.files}
    return torch, torch_models.build(cfg["model"], state)


def _onnx_file(cfg: dict, x: np.ndarray) -> Path:
    onnx_path = Path(cfg["onnx"])
    if not onnx_path.is_file():
        torch, model = _torch_model(cfg, x)
        tmp = onnx_path.with_suffix(".tmp")
        torch.onnx.export(model, (torch.from_numpy(x),), str(tmp), dynamo=False,
                          opset_version=17, input_names=["data"], output_names=["out"])
        os.replace(tmp, onnx_path)
    return onnx_path


def eager(cfg: dict, x: np.ndarray):
    torch, model = _torch_model(cfg, x)
    xt = torch.from_numpy(x)

    def fn():
        with torch.inference_mode():
            return model(xt)
    return fn, lambda out: out.numpy()


def inductor(cfg: dict, x: np.ndarray):
    """torch.compile's default mode with freezing (weights folded and prepacked, as
    PyTorch recommends for CPU inference)."""
    torch, model = _torch_model(cfg, x)
    import torch._inductor.config as inductor_config
    inductor_config.freezing = True
    compiled = torch.compile(model)
    xt = torch.from_numpy(x)

    def fn():
        with torch.no_grad():
            return compiled(xt)
    return fn, lambda out: out.numpy()


def onnxruntime(cfg: dict, x: np.ndarray):
    import onnxruntime as ort
    threads = int(cfg["threads"])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(_onnx_file(cfg, x)), opts,
                                providers=["CPUExecutionProvider"])
    feeds = {"data": x}
    return (lambda: sess.run(None, feeds)), lambda out: out[0]


def openvino(cfg: dict, x: np.ndarray):
    """OpenVINO's CPU plugin on the ONNX file: latency hint, one stream, `threads`
    inference threads, f32 (it would pick bf16 on CPUs that have it)."""
    import openvino as ov
    core = ov.Core()
    model = core.read_model(str(_onnx_file(cfg, x)))
    compiled = core.compile_model(model, "CPU", {
        "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
        "INFERENCE_NUM_THREADS": str(int(cfg["threads"])),
        "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()

    def fn():
        request.infer({0: x}, share_inputs=True)
        return request.get_output_tensor(0).data
    return fn, lambda out: np.array(out)


RUNTIMES = {"torch": eager, "inductor": inductor, "onnxruntime": onnxruntime,
            "openvino": openvino}


def main(cfg: dict) -> None:
    kind = cfg["kind"]
    try:
        __import__(PACKAGES[kind])
    except ImportError:
        emit(missing=PACKAGES[kind])
        return
    x = np.load(cfg["inputs"])["data"]
    start = time.perf_counter()
    try:
        fn, to_numpy = RUNTIMES[kind](cfg, x)
    except ImportError as e:        # e.g. no torch to export the ONNX file with
        emit(missing=e.name or str(e))
        return
    out = to_numpy(fn())            # the first call compiles (inductor) or warms up
    build_s = time.perf_counter() - start
    np.save(cfg["out"], np.asarray(out))
    secs, cpu, n = median_wall_cpu(fn, cfg.get("min_time", 1.0))
    emit(median_ms=secs * 1e3, cpu_ms=cpu * 1e3, iters=n, threads=int(cfg["threads"]),
         build_s=round(build_s, 3))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
