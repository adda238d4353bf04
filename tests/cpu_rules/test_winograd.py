"""megtrace.relay_bridge.cpu.winograd: F(4x4, 3x3) against a float64 NumPy direct
convolution (odd sizes that need padded tiles, channels that are not multiples of 16,
batches, fused epilogues), the cost rule and the MEGTRACE_WINOGRAD switch."""
import numpy as np
import pytest
from conftest import rel_err

from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.cpu import winograd as W
from megtrace.relay_bridge.cpu.conv import ConvShape

TOL = 1e-4          # relative to the largest output, as the issue asks of Winograd


def direct_conv(x, w, pad):
    """float64 NCHW cross-correlation, stride 1, written out tap by tap."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for a in range(3):
        for b in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, a:a + oh, b:b + ow], w[:, :, a, b])
    return out


def realistic(rng, n, c, h, w, oc):
    """Activations of unit scale (after BN) and He-initialised weights."""
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((oc, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
    return x, wt


def conv_block(x, wt, bias, pad, residual: bool):
    """graph: 1x1 conv (so the 3x3 conv's input is NCHW16c) -> 3x3 conv + bias -> [+ the
    1x1 result] -> relu."""
    g = Graph()
    xv = g.add_input(TensorType.of(x), "x")
    c = x.shape[1]
    eye = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)

    def op(name, *ins, **p):
        return g.add_node(get(name), list(ins), p)[0]
    y0 = op("conv2d", xv, g.add_const(eye))
    y = op("add", op("conv2d", y0, g.add_const(wt), padding=(pad, pad)), g.add_const(bias))
    if residual:
        y = op("add", y, y0)
    g.set_outputs([op("relu", y)], ["y"])
    return g


SHAPES = [  # n, c, h, w, oc, pad
    (1, 16, 9, 11, 24, 1),      # odd H and W: ragged last tiles; 24 = 1.5 blocks
    (2, 20, 13, 6, 33, 1),      # batch 2, channels not multiples of 16
    (1, 64, 14, 14, 64, 1),     # a ResNet-18 layer3-size map, whole tiles
    (1, 32, 12, 10, 32, 0),     # no padding: output 10x8
    (1, 48, 7, 7, 48, 1),       # 7x7: padded to 8x8 tiles
    # ResNet-18's 3x3 layers that take the rule at batch 1 and 8: 7-row GEMM tiles (on
    # the stack, see _schedule_gemm), 8-row ones (256 @ 14: 16 tiles)
    (1, 64, 56, 56, 64, 1),
    (8, 128, 28, 28, 128, 1),
    (1, 256, 14, 14, 256, 1),
]


@pytest.mark.parametrize("n,c,h,w,oc,pad", SHAPES,
                         ids=[f"n{s[0]}c{s[1]}_{s[2]}x{s[3]}o{s[4]}p{s[5]}" for s in SHAPES])
def test_winograd_matches_direct_conv(n, c, h, w, oc, pad, rng, monkeypatch):
    monkeypatch.setenv(W.ENV, "all")
    x, wt = realistic(rng, n, c, h, w, oc)
    bias = rng.standard_normal((1, oc, 1, 1)).astype(np.float32)
    residual = c == oc and pad == 1
    cg = compile_graph(conv_block(x, wt, bias, pad, residual), rules=True)
    assert cg.rules == ["conv", "winograd"]
    want = direct_conv(x, wt, pad) + bias
    if residual:
        want = want + x
    got = cg(x)[0]
    assert np.isfinite(got).all()
    assert rel_err(got, np.maximum(want, 0)) <= TOL


def runtime_weight_conv(x, wt, pad, blocked: bool):
    """graph: [1x1 conv, so the input is NCHW16c ->] 3x3 conv by a weight that is a graph
    input (a training step's parameter) -> relu."""
    g = Graph()
    xv, wv = g.add_input(TensorType.of(x), "x"), g.add_input(TensorType.of(wt), "w")
    c = x.shape[1]

    def op(name, *ins, **p):
        return g.add_node(get(name), list(ins), p)[0]
    if blocked:
        xv = op("conv2d", xv, g.add_const(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)))
    g.set_outputs([op("relu", op("conv2d", xv, wv, padding=(pad, pad)))], ["y"])
    return g


@pytest.mark.parametrize("n,c,h,w,oc,pad,blocked", [
    (2, 20, 13, 6, 33, 1, False),     # plain (training BatchNorm's) input, ragged blocks
    (1, 64, 14, 14, 64, 1, True),     # after a conv: already NCHW16c
    (4, 64, 16, 16, 64, 1, False),    # ResNet-18's first stage in a 64x64 training step
])
def test_runtime_weight_is_transformed_by_a_kernel(n, c, h, w, oc, pad, blocked, rng,
                                                   monkeypatch):
    monkeypatch.setenv(W.ENV, "all" if c < 64 else "auto")
    x, wt = realistic(rng, n, c, h, w, oc)
    cg = compile_graph(runtime_weight_conv(x, wt, pad, blocked), rules=True)
    assert cg.rules[-1] == "winograd"
    for scale in (1.0, -0.5):          # the transform runs on each call's weight
        got = cg(x, wt * np.float32(scale))[0]
        assert rel_err(got, np.maximum(direct_conv(x, wt * scale, pad), 0)) <= TOL


def test_runtime_weight_transform_matches_the_build_time_one(rng):
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu import layout as L
    from megtrace.relay_bridge.targets import host_target
    w = rng.standard_normal((20, 17, 3, 3)).astype(np.float32)
    t = tvm()
    func = W.weight_transform_func(20, 17).with_attr("global_symbol", "main")
    lib = t.compile(t.IRModule({"main": func}), target=t.target.Target(host_target()))
    u = t.runtime.tensor(np.zeros((6, 6, 2, 2, 16, 16), np.float32))
    lib["main"](t.runtime.tensor(L.pack_conv_weight(w, 16)), u)
    np.testing.assert_allclose(u.numpy(), W.transform_weight(w), rtol=1e-5, atol=1e-6)


def test_transforms_compute_a_4x4_correlation(rng):
    """The matrices alone: A^T [(G g G^T) * (B^T d B)] A is the 3x3 correlation of a 6x6
    tile (float64, so any wrong coefficient shows as a large error)."""
    d, g = rng.standard_normal((6, 6)), rng.standard_normal((3, 3))
    got = W.A_T @ ((W.G @ g @ W.G.T) * (W.B_T @ d @ W.B_T.T)) @ W.A_T.T
    want = np.array([[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_weight_transform_is_packed_per_block(rng):
    w = rng.standard_normal((20, 17, 3, 3)).astype(np.float32)
    u = W.transform_weight(w)
    assert u.shape == (6, 6, 2, 2, 16, 16)
    ref = np.einsum("ar,oirs,bs->abio", W.G, w.astype(np.float64), W.G)
    # out channel 18 = block 1 lane 2, in channel 16 = block 1 lane 0
    np.testing.assert_allclose(u[:, :, 1, 1, 0, 2], ref[:, :, 16, 18], rtol=1e-6)
    assert not u[:, :, 1, 1, 1:, :].any() and not u[:, :, 1, :, :, 4:].any()


@pytest.mark.parametrize("n,c,hw,want", [
    (1, 64, 56, True), (1, 128, 28, True), (1, 256, 14, True), (1, 32, 56, False),
    (1, 64, 2, False),
    # batch 1 at 7x7: 4 tiles per weight vector, the 4x larger transformed weight
    # streams longer than the direct conv computes; batch 8 reuses it 32 times
    (1, 512, 7, False), (2, 512, 7, False), (8, 512, 7, True)])
def test_cost_rule(n, c, hw, want):
    assert W.worth_it(ConvShape(n, c, hw, hw, c, 3, 3, (1, 1), (1, 1), True)) is want


def test_cost_rule_counts_weight_streaming():
    """Same multiply-adds, same GEMM: only the weight's size differs (and decides)."""
    small = ConvShape(1, 512, 7, 7, 512, 3, 3, (1, 1), (1, 1), True)
    assert W.winograd_cost(small) == W.STREAM_MACS_PER_BYTE * 4 * 36 * 512 * 512
    assert W.direct_cost(small) == small.flops / 2


def test_cost_rule_never_takes_strided_or_plain_inputs():
    assert not W.worth_it(ConvShape(1, 64, 56, 56, 64, 3, 3, (2, 2), (1, 1), True))
    assert not W.worth_it(ConvShape(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1), False))


@pytest.mark.parametrize("env,rule", [("0", "conv"), ("off", "conv"), (None, "winograd")])
def test_switch(env, rule, rng, monkeypatch):
    if env is None:
        monkeypatch.delenv(W.ENV, raising=False)
    else:
        monkeypatch.setenv(W.ENV, env)
    x, wt = realistic(rng, 1, 64, 14, 14, 64)
    bias = np.zeros((1, 64, 1, 1), np.float32)
    cg = compile_graph(conv_block(x, wt, bias, 1, False), rules=True)
    assert cg.rules == ["conv", rule]
    assert rel_err(cg(x)[0], np.maximum(direct_conv(x, wt, 1), 0)) <= TOL


def test_switch_is_part_of_the_compile_cache_key(rng, monkeypatch):
    """A build cached with Winograd must not answer a process that turned it off."""
    from megtrace.relay_bridge.compile_cache import entry_key
    from megtrace.relay_bridge.executable import BuildOptions
    from megtrace.relay_bridge.targets import resolve
    x, wt = realistic(rng, 1, 64, 14, 14, 64)
    g = conv_block(x, wt, np.zeros((1, 64, 1, 1), np.float32), 1, False)
    keys = set()
    for env in ("0", "auto", "all"):
        monkeypatch.setenv(W.ENV, env)
        keys.add(entry_key(g, resolve(None), True, BuildOptions()))
    assert len(keys) == 3


def test_gemm_register_tile():
    """2 output blocks x up to 8 tiles with AVX-512 when the blocks pair up (ResNet-18's
    56x56 and 28x28 maps: 196 and 49 tiles, 7 per block without padding), else the
    1-block tile of up to 14 (AVX-512) or 6 (AVX2) tiles."""
    assert W.gemm_channel_blocks(4, 16) == 2
    assert W.gemm_channel_blocks(3, 16) == 1 and W.gemm_channel_blocks(4, 8) == 1
    assert W.register_rows(196, 16, 2) == 7 and W.register_rows(49, 16, 2) == 7
    assert W.register_rows(16, 16, 2) == 8 and W.register_rows(4, 16, 2) == 4
    assert W.register_rows(196, 16, 1) == 14 and W.register_rows(196, 8, 1) <= 6


def test_per_tile_buffers_are_not_workspace_allocations(monkeypatch):
    """The GEMM's 7 x 2 x 16 accumulator (896 bytes) and the input transform's row of
    B^T d (384 bytes) must be stack arrays: TVM hands a CPU kernel's "local" buffers to
    TVMBackendAllocWorkspace, one call per tile, and there LLVM did not keep the GEMM tile
    in registers (ResNet-18's 64 @ 56x56 Winograd conv 12% + 5% slower). The tile is an
    AVX-512 host's, whatever the host (an AVX2 host's is 5 x 1 x 16)."""
    import re

    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.targets import host_target
    t = tvm()
    monkeypatch.setattr(W, "vector_lanes", lambda: 16)
    conv = ConvShape(1, 64, 28, 28, 64, 3, 3, (1, 1), (1, 1), True)
    assert W.WinogradShape(conv).rows == 7 and W.WinogradShape(conv).channel_blocks == 2
    func = W.winograd_conv2d(conv).with_attr("global_symbol", "main")
    lib = t.compile(t.IRModule({"main": func}), target=t.target.Target(host_target()))
    llvm_ir = lib.mod.inspect_source("ll") if hasattr(lib, "mod") else lib.inspect_source("ll")
    heap = re.findall(r"%(\w+) = tail call ptr %\d+\(i32 1, i32 %dev_id, i64 \d+", llvm_ir)
    assert "v" in heap and not [n for n in heap if n.startswith(("gemm", "bt_d"))], heap
