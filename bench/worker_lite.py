"""Benchmark worker: MegEngine Lite 1.13 on a .mge file megtrace dumped; loads the
model once and times forward() + wait() with the input set once.

    python worker_lite.py '{"lite_dir": ..., "model_file": ..., "inputs": ..., "out": ...,
                            "threads": 2, "min_time": 1.0}'
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from bench_common import emit, fail, median_wall_cpu  # noqa: E402


def main(cfg: dict) -> None:
    from lite_runner import _import_lite          # the shims Lite needs on Python 3.11
    lite = _import_lite(cfg["lite_dir"])
    net = lite.LiteNetwork()
    net.threads_number = int(cfg["threads"])      # before load, as Lite requires
    start = time.perf_counter()
    net.load(cfg["model_file"])
    load_s = time.perf_counter() - start
    names = list(net.get_all_input_name())
    if names != ["data"]:
        fail(f"unexpected Lite inputs {names}")
    x = np.ascontiguousarray(np.load(cfg["inputs"])["data"])
    net.get_io_tensor("data").set_data_by_copy(x)

    def forward():
        net.forward()
        net.wait()
    forward()
    out_name = list(net.get_all_output_name())[0]
    np.save(cfg["out"], net.get_io_tensor(out_name).to_numpy().copy())
    secs, cpu, n = median_wall_cpu(forward, cfg.get("min_time", 1.0))
    emit(median_ms=secs * 1e3, cpu_ms=cpu * 1e3, iters=n, threads=net.threads_number,
         build_s=round(load_s, 2))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
