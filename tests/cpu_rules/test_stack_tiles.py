"""Per-tile accumulators of the conv, depthwise, pooling and GEMV rules are stack arrays,
not TVMBackendAllocWorkspace calls, and depthwise results still match float64 NumPy.

TVM 0.27 hands a CPU kernel's "local" buffers to TVMBackendAllocWorkspace (the heap),
one call per output tile, and only "global" ones under 1 KB to the stack. Measured on
MobileNetV2 b1 (1 thread, CPU time): its depthwise kernels took 20-55 % longer with the
4 x 16 accumulator on the heap."""
import re

import numpy as np
import pytest
from conftest import rel_err
from conv_reference import conv_ref

from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.cpu.conv import ConvShape, conv2d_nchwc
from megtrace.relay_bridge.cpu.dense import DenseShape, dense_packed
from megtrace.relay_bridge.cpu.depthwise import DepthwiseShape, depthwise_nchwc
from megtrace.relay_bridge.cpu.pool import pool_nchwc

TOL = 1e-5


def workspace_allocations(func) -> list[tuple[str, int]]:
    """(buffer, bytes) of each TVMBackendAllocWorkspace call in the kernel's LLVM IR
    (device type 1: CPU)."""
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.targets import host_target
    t = tvm()
    func = func.with_attr("global_symbol", "main")
    lib = t.compile(t.IRModule({"main": func}), target=t.target.Target(host_target()))
    llvm_ir = lib.mod.inspect_source("ll") if hasattr(lib, "mod") else lib.inspect_source("ll")
    found = re.findall(r"%(\w+) = tail call ptr %\d+\(i32 1, i32 %dev_id, i64 (\d+)", llvm_ir)
    return [(name, int(size)) for name, size in found]


def test_depthwise_tile_is_on_the_stack():
    shape = DepthwiseShape(1, 96, 28, 28, 96, 3, 3, (1, 1), (1, 1), True)
    assert workspace_allocations(depthwise_nchwc(shape)) == []


@pytest.mark.parametrize("shape", [
    ConvShape(1, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3), False),    # ResNet-18's stem
    ConvShape(1, 128, 28, 28, 256, 1, 1, (2, 2), (0, 0), True),    # a 1x1 downsample
    ConvShape(1, 96, 14, 14, 576, 1, 1, (1, 1), (0, 0), True)])    # a MobileNetV2 1x1
def test_conv_tile_is_on_the_stack(shape):
    """Only the padded input copy (hundreds of KB, once per call) stays a workspace."""
    assert [name for name, _ in workspace_allocations(conv2d_nchwc(shape))] in ([], ["pad"])


def test_gemv_tile_is_on_the_stack():
    assert DenseShape(1, 512, 1000).tile == (1, 64)
    assert workspace_allocations(dense_packed(DenseShape(1, 512, 1000))) == []


def test_one_kilobyte_winograd_tile_is_on_the_stack_through_the_rules_pipeline(monkeypatch):
    """256 @ 14x14's 8 x 2 x 16 GEMM tile is exactly 1 KB, which TVM would allocate per
    tile: relay_bridge/stack_tiles.py keeps it on the stack (7% faster). The tile is the
    one an AVX-512 host gets (an AVX2 host's is 4 x 1 x 16, 256 bytes), whatever the host."""
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu import winograd as W
    from megtrace.relay_bridge.cpu_tir_pipeline import cpu_tir_pipeline
    from megtrace.relay_bridge.targets import host_target
    t = tvm()
    monkeypatch.setattr(W, "vector_lanes", lambda: 16)
    conv = ConvShape(1, 256, 14, 14, 256, 3, 3, (1, 1), (1, 1), True)
    assert W.WinogradShape(conv).rows * W.WinogradShape(conv).channel_blocks * 16 * 4 == 1024
    func = W.winograd_conv2d(conv).with_attr("global_symbol", "main")
    mod = t.IRModule({"main": func})
    target = t.target.Target(host_target())

    def heap(pipeline):
        lib = t.tirx.build(mod, target=target, pipeline=pipeline)
        llvm_ir = lib.inspect_source("ll")
        return re.findall(r"%(\w+) = tail call ptr %\d+\(i32 1, i32 %dev_id, i64 \d+", llvm_ir)
    assert "gemm_global" in heap("default")
    ours = heap(cpu_tir_pipeline())
    assert "v" in ours and "gemm_global" not in ours, ours


def test_pool_tile_is_on_the_stack():
    assert workspace_allocations(pool_nchwc((1, 64, 56, 56), "max", (3, 3), (2, 2),
                                            (1, 1))) == []


@pytest.mark.parametrize("c,h,s", [(32, 56, 1), (96, 28, 2), (144, 14, 1), (192, 7, 1),
                                   (40, 15, 2)])
def test_depthwise_on_mobilenet_maps(c, h, s):
    """1x1 conv (so the depthwise input is NCHW16c) -> 3x3 depthwise (MobileNetV2's maps,
    row tails of 56 / 14 / 7 / 8 columns) -> ReLU6."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, h, h)).astype(np.float32)
    w1 = (rng.standard_normal((c, 16, 1, 1)) / 4).astype(np.float32)
    wd = (rng.standard_normal((c, 1, 1, 3, 3)) / 3).astype(np.float32)
    g = Graph()
    y = g.add_node(get("conv2d"), [g.add_input(TensorType.of(x), "x"), g.add_const(w1)], {})[0]
    y = g.add_node(get("conv2d"), [y, g.add_const(wd)], {"stride": (s, s),
                                                         "padding": (1, 1)})[0]
    y = g.add_node(get("clip"), [y], {"lower": 0.0, "upper": 6.0})[0]
    g.set_outputs([y], ["y"])
    cg = compile_graph(g)
    assert cg.rules == ["conv", "depthwise"]
    mid = np.einsum("nchw,oc->nohw", x.astype(np.float64), w1[:, :, 0, 0].astype(np.float64))
    want = np.clip(conv_ref(mid, wd, (s, s), (1, 1)), 0, 6)
    got = cg(x)[0]
    assert np.isfinite(got).all() and rel_err(got, want) <= TOL
