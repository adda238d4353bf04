"""Do optimize_for_inference's float16 and layout options help megtrace's own compiled
graph on this CPU? (not a test)

    .venv/bin/python bench/bench_layout_options.py [--model resnet|mobilenet_v2|convnet]
                                                  [--size 64] [--rounds 5]

The model is traced once; each option's optimized graph (relay_bridge.optimize, the graph
the .mge gets) is compiled with compile_graph, as trace's __call__ compiles, and the
builds are timed in alternating rounds (median of each round's mean call time), so load
from other processes hits all of them alike. Prints the median latency per option, its
ratio to the float32 graph and the load average measured.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_cpu import measure, traced_graph, vm_timer  # noqa: E402

OPTIONS = {"float32 (fuse_conv_bias)": {"fuse_conv_bias_nonlinearity": True},
           "enable_io16xc32": {"fuse_conv_bias_nonlinearity": True, "f16_io_f32_comp": True},
           "enable_ioc16": {"fuse_conv_bias_nonlinearity": True, "f16_io_comp": True},
           "enable_nchw88": {"layout": "nchw88"},
           "enable_nchw44": {"layout": "nchw44"}}


def _model(name: str):
    from models import ConvNet, randomize_bn
    from zoo_models import FAMILIES
    net = ConvNet() if name == "convnet" else FAMILIES[name][0]()
    return randomize_bn(net, np.random.default_rng(0)).eval()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from megtrace.relay_bridge import compile_graph
    from megtrace.relay_bridge.optimize import optimize_for_inference

    size = 32 if args.model == "convnet" else args.size
    x = np.random.default_rng(0).normal(size=(1, 3, size, size)).astype(np.float32)
    graph = traced_graph(_model(args.model), x)
    timers = {}
    for label, kw in OPTIONS.items():
        g, _ = optimize_for_inference(graph, **kw)
        feeds = [x.astype(v.type.dtype) for v in g.inputs]
        timers[label] = vm_timer(compile_graph(g), feeds)
    times: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(args.rounds):
        for label, fn in timers.items():
            times[label].append(measure(fn, repeat=3))
    base = statistics.median(times[next(iter(times))])
    print(f"{args.model} 1x3x{size}x{size}, load average {os.getloadavg()[0]:.1f}")
    for label, ts in times.items():
        t = statistics.median(ts)
        print(f"  {label:28s} {t * 1e3:8.3f} ms   x{t / base:.2f}")


if __name__ == "__main__":
    main()
