"""CPU rules vs TVM's untuned default vs NumPy eager, in one run (not a test).

    .venv/bin/python bench/bench_cpu.py [--quick] [--no-default] [--no-zoo] [--only NAME]

For each workload: median latency of the graph compiled with TVM's default pipeline
(untuned, what megtrace did before megtrace.relay_bridge.cpu), with the CPU rules, and of
megtrace's NumPy eager ops; GFLOP/s of the rules and their share of 230 GFLOP/s (2-core
AVX-512 FMA peak, cpu-schedules.md). Graph timings take plain NCHW in and out, so a lone
conv pays its layout conversions; "kernel" rows time the rule's PrimFunc alone on
NCHW16c data, as cpu-schedules.md does (ResNet-18's 3x3 layers both direct and by
Winograd; GFLOP/s there counts the direct conv's FLOPs, so Winograd can pass the peak). Each figure is the median of `repeat` runs,
each the mean of enough back-to-back calls to last about 50 ms. The 2 vCPUs of the
development VM are noisy (5-15 % run to run).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

PEAK = 230.0            # GFLOP/s, 2 cores x 16 fp32 FMA lanes x 2 units x ~3.6 GHz


def measure(fn: Callable[[], Any], repeat: int, target_s: float = 0.05) -> float:
    """Median seconds per call."""
    fn()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < target_s / 5 and calls < 1000:
        fn()
        calls += 1
    per = (time.perf_counter() - start) / max(calls, 1)
    number = max(1, int(target_s / max(per, 1e-7)))
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def graph_flops(graph) -> int:
    """2 x multiply-adds of every conv2d and matmul node."""
    total = 0
    for node in graph.nodes:
        if node.op.name == "conv2d":
            w, out = node.inputs[1].type, node.outputs[0].type
            total += 2 * out.size * int(np.prod(w.shape[-3:]))
        elif node.op.name == "matmul":
            a, out = node.inputs[0].type, node.outputs[0].type
            k = a.shape[-2] if node.kwargs["transpose_a"] else a.shape[-1]
            total += 2 * out.size * k
    return total


def vm_timer(compiled, arrays):
    """A zero-argument call of the compiled graph on device tensors (no NumPy copies)."""
    from megtrace.relay_bridge._tvm import relax, tvm
    dev = tvm().cpu(0)
    vm = relax().VirtualMachine(compiled.executable, dev)
    args = [tvm().runtime.tensor(a, dev) for a in arrays]
    main = vm["main"]
    return lambda: main(*args)


def op_graph(op: str, inputs: list[np.ndarray], consts: list[np.ndarray], **params):
    from megtrace.ir import Graph, TensorType
    from megtrace.ops import get
    g = Graph()
    vs = [g.add_input(TensorType.of(a), f"x{i}") for i, a in enumerate(inputs)]
    vs += [g.add_const(c, f"c{i}") for i, c in enumerate(consts)]
    outs = g.add_node(get(op), vs, params)
    g.set_outputs(outs, ["y"])
    return g


def traced_graph(net, x: np.ndarray):
    import megtrace as mge
    from megtrace.jit import trace

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)
    infer(mge.tensor(x))
    return infer.graph


class Table:
    """Workloads are timed in two phases, TVM first and NumPy last: OpenBLAS's threads
    keep spinning after a call and, on 2 vCPUs, starve TVM's thread pool (a 20 us GEMV
    measured 1.1 ms right after a NumPy GEMM)."""

    def __init__(self, repeat: int, with_default: bool, only: str = ""):
        self.repeat, self.with_default, self.only = repeat, with_default, only.lower()
        self.rows: list[dict] = []

    def wanted(self, name: str) -> bool:
        return self.only in name.lower()

    def graph(self, name: str, graph, inputs, numpy_fn, repeat: int | None = None,
              note: str = "") -> None:
        from megtrace.relay_bridge import compile_graph
        if not self.wanted(name):
            return
        repeat = repeat or self.repeat
        rules_cg = compile_graph(graph, rules=True)
        if rules_cg.pipeline != "cpu-rules":
            note += " (rules fell back!)"
        got = rules_cg(*inputs)[0]
        want = numpy_fn()
        want = want[0] if isinstance(want, (list, tuple)) else want
        err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        time.sleep(0.3)                 # see the class docstring
        r = dict(name=name, flops=graph_flops(graph), numpy_fn=numpy_fn,
                 numpy_repeat=max(3, repeat // 3), note=f"err {err:.1e} {note}".strip(),
                 rules=measure(vm_timer(rules_cg, inputs), repeat), default=None)
        if self.with_default:
            r["default"] = measure(vm_timer(compile_graph(graph, rules=False), inputs),
                                   max(3, repeat // 3))
        self.rows.append(r)
        print(f"  timed {name}", file=sys.stderr, flush=True)

    def kernel(self, name: str, func, arrays, flops: int) -> None:
        """A rule's PrimFunc alone (blocked layout in and out)."""
        if not self.wanted(name):
            return
        from megtrace.relay_bridge._tvm import tvm
        from megtrace.relay_bridge.targets import resolve
        t = tvm()
        lib = t.compile(t.IRModule({"main": func.with_attr("global_symbol", "main")}),
                        target=resolve(None))
        dev = t.cpu(0)
        args = [t.runtime.tensor(a, dev) for a in arrays]
        fn = lib["main"]
        self.rows.append(dict(name=name, flops=flops, numpy_fn=None, note="kernel only",
                              rules=measure(lambda: fn(*args), self.repeat), default=None))

    def finish(self) -> None:
        time.sleep(1.0)                 # let TVM's workers stop spinning
        for r in self.rows:
            r["numpy"] = measure(r["numpy_fn"], r["numpy_repeat"]) if r["numpy_fn"] else None
        print(f"{'workload':<28} {'default ms':>10} {'rules ms':>10} {'numpy ms':>10} "
              f"{'vs def':>8} {'vs np':>6} {'GFLOP/s':>8} {'%peak':>7}")
        for r in self.rows:
            _row(r["name"], r["flops"], r["default"], r["rules"], r["numpy"], r["note"])
        print(f"load average at end {os.getloadavg()[0]:.2f} (another process on the 2 vCPUs "
              "slows every column)")


def _row(name: str, flops: int, default: float | None, rules: float, numpy_s: float | None,
         note: str = "") -> None:
    def ms(s):
        return "-" if s is None else f"{s * 1e3:9.3f}"
    gf = flops / rules / 1e9 if flops else 0.0
    speed = f"{default / rules:7.1f}x" if default else "      -"
    vs_np = f"{numpy_s / rules:6.1f}x" if numpy_s else "     -"
    print(f"{name:<28} {ms(default):>10} {ms(rules):>10} {ms(numpy_s):>10} {speed} {vs_np} "
          f"{gf:8.1f} {100 * gf / PEAK:6.1f}%  {note}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--no-default", action="store_true", help="skip TVM's untuned default")
    ap.add_argument("--no-zoo", action="store_true", help="skip ResNet-18/MobileNetV2/encoder")
    ap.add_argument("--only", default="", help="run the workloads whose name contains this")
    args = ap.parse_args()
    repeat = 5 if args.quick else 9
    with_default = not args.no_default

    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu import layout as L
    from megtrace.relay_bridge.cpu.conv import ConvShape, conv2d_nchwc
    from megtrace.relay_bridge.cpu.dense import DenseShape, dense_packed
    from megtrace.relay_bridge.cpu.depthwise import DepthwiseShape, depthwise_nchwc
    from megtrace.relay_bridge.cpu.winograd import transform_weight, winograd_conv2d
    from megtrace.ops import get
    from megtrace.relay_bridge.targets import resolve
    import models
    from models import randomize_bn

    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)     # noqa: E731
    tvm()
    print(f"target {resolve(None)}; TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')} "
          f"(set by relay_bridge); {os.cpu_count()} CPUs; peak {PEAK:.0f} GFLOP/s; "
          f"load average at start {os.getloadavg()[0]:.2f}")
    tab = Table(repeat, with_default, args.only)

    def eager(op, arrays, **p):
        d = get(op)
        kw = dict(d.bind(p))
        return lambda: d.run_eager(arrays, kw)

    # -- single ops as graphs (NCHW in/out), and kernels alone ---------------------------
    x, w = f32(1, 64, 56, 56), f32(64, 64, 3, 3)
    p = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    tab.graph("conv3x3 64->64 @56", op_graph("conv2d", [x], [w], **p), [x],
              eager("conv2d", [x, w], **p))
    s = ConvShape(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1), True)
    tab.kernel("conv3x3 64->64 @56 NCHW16c", conv2d_nchwc(s),
               [L.pack_activation(x), L.pack_conv_weight(w, 16), np.zeros(s.out_shape, "f")],
               s.flops)

    for c, hw in ((64, 56), (128, 28), (256, 14), (512, 7)):     # ResNet-18's 3x3 layers
        x, w = f32(1, c, hw, hw), f32(c, c, 3, 3)
        s = ConvShape(1, c, hw, hw, c, 3, 3, (1, 1), (1, 1), True)
        blocked, out = L.pack_activation(x), np.zeros(s.out_shape, "f")
        tab.kernel(f"conv3x3 {c}->{c} @{hw} direct", conv2d_nchwc(s),
                   [blocked, L.pack_conv_weight(w, 16), out], s.flops)
        tab.kernel(f"conv3x3 {c}->{c} @{hw} winograd", winograd_conv2d(s),
                   [blocked, transform_weight(w), out], s.flops)

    a, b = f32(128, 768), f32(768, 768)
    tab.graph("GEMM 128x768x768", op_graph("matmul", [a], [b], transpose_b=True), [a],
              eager("matmul", [a, b], transpose_a=False, transpose_b=True))
    a, b = f32(1, 512), f32(1000, 512)
    tab.graph("GEMV 1x512x1000", op_graph("matmul", [a], [b], transpose_b=True), [a],
              eager("matmul", [a, b], transpose_a=False, transpose_b=True))
    ds = DenseShape(1, 512, 1000)
    tab.kernel("GEMV 1x512x1000", dense_packed(ds),
               [a, L.pack_dense_weight(b, True, ds.tile[1]), np.zeros((1, 1000), "f")],
               ds.flops)

    x, w = f32(1, 144, 56, 56), f32(144, 1, 1, 3, 3)
    tab.graph("depthwise 144ch @56", op_graph("conv2d", [x], [w], **p), [x],
              eager("conv2d", [x, w], **p))
    s = DepthwiseShape(1, 144, 56, 56, 144, 3, 3, (1, 1), (1, 1), True)
    tab.kernel("depthwise 144ch @56 NCHW16c", depthwise_nchwc(s),
               [L.pack_activation(x), L.pack_depthwise_weight(w), np.zeros(s.out_shape, "f")],
               s.flops)

    # -- models ---------------------------------------------------------------------------
    cases = [("MLP b1", models.MLP, (1, 64)), ("MLP b64", models.MLP, (64, 64)),
             ("ConvNet b1 3x32x32", models.ConvNet, (1, 3, 32, 32)),
             ("ConvNet b16 3x32x32", models.ConvNet, (16, 3, 32, 32)),
             ("GapNet b1 3x16x16", models.GapNet, (1, 3, 16, 16)),
             ("GapNet b16 3x64x64", models.GapNet, (16, 3, 64, 64))]
    if not args.no_zoo:
        import zoo
        cases += [("ResNet-18 b1 224", lambda: zoo.ResNet18(1000), (1, 3, 224, 224)),
                  ("MobileNetV2 b1 224", lambda: zoo.MobileNetV2(1000), (1, 3, 224, 224)),
                  ("Encoder b1 s128 h768", lambda: zoo.EncoderBlock(), (1, 128, 768))]
    import megtrace as mge
    for name, make, shape in cases:
        if not tab.wanted(name):
            continue
        net = randomize_bn(make(), rng).eval()
        xin = f32(*shape)
        graph = traced_graph(net, xin)
        tin = mge.tensor(xin)
        heavy = graph_flops(graph) > 5e8
        tab.graph(name, graph, [xin], lambda net=net, tin=tin: net(tin).numpy(),
                  3 if heavy else repeat)
    tab.finish()


if __name__ == "__main__":
    main()
