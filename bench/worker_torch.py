"""Benchmark worker: PyTorch eager or ONNX Runtime on the same weights (run with a
Python that has torch, onnxruntime and onnx; see bench_models.py --prepare-bench-env).

    python worker_torch.py '{"kind": "torch" | "onnxruntime", "model": "resnet18",
                             "state": ..., "inputs": ..., "out": ..., "onnx": ...,
                             "threads": 2, "min_time": 1.0}'

The ONNX file is exported from the torch twin once (TorchScript exporter, opset 17)
and reused by later runs.
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

from bench_common import emit, median_seconds  # noqa: E402


def main(cfg: dict) -> None:
    threads = int(cfg["threads"])
    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    import torch_models
    with np.load(cfg["state"]) as data:
        state = {k: data[k] for k in data.files}
    x = np.load(cfg["inputs"])["data"]
    start = time.perf_counter()
    model = torch_models.build(cfg["model"], state)
    if cfg["kind"] == "torch":
        xt = torch.from_numpy(x)

        def fn():
            with torch.inference_mode():
                return model(xt)
        build_s = time.perf_counter() - start
        out = fn().numpy()
    else:
        import onnxruntime as ort
        onnx_path = Path(cfg["onnx"])
        if not onnx_path.is_file():
            tmp = onnx_path.with_suffix(".tmp")
            torch.onnx.export(model, (torch.from_numpy(x),), str(tmp), dynamo=False,
                              opset_version=17, input_names=["data"], output_names=["out"])
            os.replace(tmp, onnx_path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        start = time.perf_counter()
        sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        build_s = time.perf_counter() - start
        feeds = {"data": x}

        def fn():
            return sess.run(None, feeds)
        out = fn()[0]
    np.save(cfg["out"], np.asarray(out))
    secs, n = median_seconds(fn, cfg.get("min_time", 1.0))
    emit(median_ms=secs * 1e3, iters=n, threads=threads, build_s=round(build_s, 3))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
