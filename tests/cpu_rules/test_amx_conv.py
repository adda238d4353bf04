"""conv2d on AMX tiles (relay_bridge/cpu/amx_conv.py): the phase layout's geometry, the
packed weight, and the kernel against a float64 NumPy convolution at ResNet-18's
shapes (3x3 stride 1 and 2, 1x1 stride 2; 7x7 to 56x56 maps; batch 1 and 8). On any
host through amx.EmulatedTiles (the same tile program in plain TIR: addressing, tap
shifts, phases, packing), and in a compiled graph with real tiles where AMX is lent."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import rel_err
from conv_reference import conv_ref

from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.cpu import amx, amx_conv
from megtrace.relay_bridge.cpu.conv import ConvShape
from megtrace.relay_bridge.targets import amx_wanted

needs_amx = pytest.mark.skipif(not amx_wanted(), reason="this CPU or OS lends no AMX tiles")


def conv_graph(x, w, bias, stride, pad, residual: bool):
    """1x1 identity conv (so the conv under test reads NCHW16c) -> conv + bias
    [+ a runtime residual] -> relu."""
    g = Graph()
    xv = g.add_input(TensorType.of(x), "x")
    c = x.shape[1]

    def op(name, *ins, **p):
        return g.add_node(get(name), list(ins), p)[0]
    y0 = op("conv2d", xv, g.add_const(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)))
    y = op("add", op("conv2d", y0, g.add_const(w), stride=(stride, stride),
                     padding=(pad, pad)), g.add_const(bias))
    if residual:
        r = g.add_input(TensorType((x.shape[0], w.shape[0], *y.type.shape[2:]), "float32"),
                        "r")
        y = op("add", y, r)
    g.set_outputs([op("relu", y)], ["y"])
    return g


def test_phase_layout_geometry():
    """A 3x3/1 conv on 7x7 (pad 1): one phase, rows 9 wide, 7 x 9 = 63 virtual pixels in
    4 tiles, whose bottom-right tap reads up to pixel 63 + 2 * 9 + 2; stride 2 on 14x14:
    4 phases of 8 x 8 (16 padded columns / 2), taps (2, 2) one row and column into
    phase (0, 0)."""
    s1 = amx_conv.AmxConvShape(ConvShape(1, 512, 7, 7, 512, 3, 3, (1, 1), (1, 1)))
    assert (s1.phases, s1.wv, s1.hv, s1.rows, s1.steps) == (1, 9, 9, 64, 9 * 16)
    assert s1.shift(2, 2) == 2 * 9 + 2 and s1.pixels == 64 + 2 * 9 + 2
    s2 = amx_conv.AmxConvShape(ConvShape(1, 256, 14, 14, 512, 3, 3, (2, 2), (1, 1)))
    assert (s2.phases, s2.wv, s2.hv, s2.rows) == (4, 8, 8, 64)
    assert s2.shift(2, 2) == 9 and s2.shift(1, 1) == 0 and s2.pixels == 64 + 9
    assert s2.tiles_shape == (1, 8, 2, 4, 73, 2, 16)


def test_row_groups_give_the_threads_tasks():
    """At least amx_conv.MIN_TASKS tasks where the rows allow, the last group shorter
    (128 @ 28x28: 53 row blocks as 27 + 26); batch 8 fills that with whole images."""
    def geometry(n, c, hw):
        s = amx_conv.AmxConvShape(ConvShape(n, c, hw, hw, c, 3, 3, (1, 1), (1, 1)))
        return s.rows // 16, s.group_blocks, s.groups
    assert geometry(1, 128, 28) == (53, 27, 2)          # 4 columns x 2 groups
    assert geometry(1, 64, 56) == (203, 51, 4)          # 2 columns x 4 groups
    assert geometry(8, 64, 56) == (203, 203, 1)         # 8 images x 2 columns
    assert geometry(1, 512, 7) == (4, 4, 1)             # 16 columns


def test_packed_weight_is_the_tap_major_gemm_weight(rng):
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32)
    packed = amx_conv.pack_conv_weight(w)
    assert packed.shape == (4, 9, 2, 16, 32)
    hi, lo = amx.split_bf16(w)
    for oc, c, r, s in ((0, 0, 0, 0), (17, 5, 1, 2), (63, 31, 2, 2), (40, 30, 2, 0)):
        k = (r * 3 + s) * 32 + c
        for part, want in ((0, hi), (1, lo)):
            got = packed[oc // 16, k // 32, part, (k % 32) // 2, (oc % 16) * 2 + k % 2]
            assert got == want[oc, c, r, s]


def test_applies_to_whole_channel_tiles_only():
    assert amx_conv.applies(ConvShape(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1)))
    assert not amx_conv.applies(ConvShape(1, 48, 56, 56, 64, 3, 3, (1, 1), (1, 1)))
    assert not amx_conv.applies(ConvShape(1, 64, 56, 56, 48, 3, 3, (1, 1), (1, 1)))
    assert not amx_conv.applies(ConvShape(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1), False))


def test_switch_is_off_unless_asked_and_part_of_the_cache_key(rng, monkeypatch):
    from megtrace.relay_bridge.compile_cache import entry_key
    from megtrace.relay_bridge.executable import BuildOptions
    from megtrace.relay_bridge.targets import resolve
    monkeypatch.delenv(amx_conv.ENV, raising=False)
    assert amx_conv.mode() == "off"
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    w = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
    g = conv_graph(x, w, np.zeros((1, 32, 1, 1), np.float32), 1, 1, False)
    keys = {entry_key(g, resolve(None), True, BuildOptions())}
    for env, want in (("1", "all"), ("0", "off"), ("yes", "all"), ("direct", "direct")):
        monkeypatch.setenv(amx_conv.ENV, env)
        assert amx_conv.mode() == want
        keys.add(entry_key(g, resolve(None), True, BuildOptions()))
    assert len(keys) == 3


def run_emulated(conv: ConvShape, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """conv2d_amx(emulate=True) built alone and run on NCHW x; NCHW result."""
    from megtrace.relay_bridge._tvm import tvm
    t = tvm()
    func = amx_conv.conv2d_amx(conv, emulate=True).with_attr("global_symbol", "main")
    lib = t.compile(t.IRModule({"main": func}), target="llvm")
    n, c, h, wd = x.shape
    xb = np.ascontiguousarray(x.reshape(n, c // 16, 16, h, wd).transpose(0, 1, 3, 4, 2))
    args = [t.runtime.tensor(a) for a in (xb, amx_conv.pack_conv_weight(w), amx.tile_config(),
                                          np.full(conv.out_shape, np.nan, np.float32))]
    lib["main"](*args)
    return args[-1].numpy().transpose(0, 1, 4, 2, 3).reshape(n, conv.oc, conv.oh, conv.ow)


SHAPES = [  # n, c, hw, oc, k, stride, pad: ResNet-18's convs past the stem, and odd ones
    (1, 512, 7, 512, 3, 1, 1),
    (8, 512, 7, 512, 3, 1, 1),
    (1, 256, 14, 512, 3, 2, 1),
    (8, 256, 14, 512, 1, 2, 0),
    (1, 256, 14, 256, 3, 1, 1),
    (1, 128, 28, 128, 3, 1, 1),
    (1, 64, 56, 128, 3, 2, 1),
    (1, 64, 56, 64, 3, 1, 1),
    (2, 32, 9, 64, 3, 1, 0),        # no padding, odd map
    (1, 32, 11, 32, 5, 2, 2),       # 5x5 stride 2, odd padded width
]


IDS = [f"n{s[0]}c{s[1]}_{s[2]}o{s[3]}k{s[4]}s{s[5]}p{s[6]}" for s in SHAPES]


@pytest.mark.parametrize("n,c,hw,oc,k,stride,pad", SHAPES, ids=IDS)
def test_emulated_tile_program_matches_float64(n, c, hw, oc, k, stride, pad, rng):
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((oc, c, k, k)) * np.sqrt(2.0 / (k * k * c))).astype(np.float32)
    conv = ConvShape(n, c, hw, hw, oc, k, k, (stride, stride), (pad, pad))
    got, want = run_emulated(conv, x, w), conv_ref(x, w, (stride, stride), (pad, pad))
    # bf16 hi/lo split: a few 1e-6 of the largest output (float32: ~1e-6)
    assert rel_err(got, want) <= 2e-5


@needs_amx
@pytest.mark.parametrize("n,c,hw,oc,k,stride,pad", SHAPES, ids=IDS)
def test_amx_conv_matches_float64(n, c, hw, oc, k, stride, pad, rng, monkeypatch):
    monkeypatch.setenv(amx_conv.ENV, "1")
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((oc, c, k, k)) * np.sqrt(2.0 / (k * k * c))).astype(np.float32)
    bias = rng.standard_normal((1, oc, 1, 1)).astype(np.float32)
    residual = oc == 512 and k == 3
    cg = compile_graph(conv_graph(x, w, bias, stride, pad, residual), rules=True)
    assert cg.rules[1] == "conv_amx"
    want = conv_ref(x, w, (stride, stride), (pad, pad)) + bias
    args = [x]
    if residual:
        r = rng.standard_normal(want.shape).astype(np.float32)
        want, args = want + r, [x, r]
    got = cg(*args)[0]
    assert got.shape == want.shape
    # bf16 hi/lo split: a few 1e-6 of the largest output (float32: ~1e-6)
    assert rel_err(got, np.maximum(want, 0)) <= 2e-5


@pytest.mark.parametrize("n,c,hw,oc,k,stride,pad", [SHAPES[0], SHAPES[3], SHAPES[6]],
                         ids=[IDS[0], IDS[3], IDS[6]])
def test_graph_path_with_emulated_tiles(n, c, hw, oc, k, stride, pad, rng, monkeypatch):
    """lower.py's wiring (packed weight and tile config constants, the epilogue's bias,
    runtime residual and relu) on any host: the rule taken as on an AMX host, its kernel
    built with EmulatedTiles."""
    from functools import partial

    from megtrace.relay_bridge.cpu import lower
    monkeypatch.setattr(lower._CpuLowering, "_amx_conv",
                        lambda self, shape, w: amx_conv.applies(shape))
    monkeypatch.setattr(lower.amx_conv, "conv2d_amx",
                        partial(amx_conv.conv2d_amx, emulate=True))
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((oc, c, k, k)) * np.sqrt(2.0 / (k * k * c))).astype(np.float32)
    bias = rng.standard_normal((1, oc, 1, 1)).astype(np.float32)
    cg = compile_graph(conv_graph(x, w, bias, stride, pad, True), rules=True)
    assert cg.rules[1] == "conv_amx"
    want = conv_ref(x, w, (stride, stride), (pad, pad)) + bias
    r = rng.standard_normal(want.shape).astype(np.float32)
    assert rel_err(cg(x, r)[0], np.maximum(want + r, 0)) <= 2e-5


@pytest.mark.parametrize("env,want", [("all", ["conv_amx"] * 3),
                                      ("direct", ["conv_amx", "winograd", "conv_amx"]),
                                      ("0", ["conv", "winograd", "conv"])])
def test_direct_mode_leaves_winograd_its_convs(env, want, rng, monkeypatch):
    """MEGTRACE_AMX_CONV=direct: the rule takes the convs the FMA rule would (a 3x3/2, a
    512-channel 3x3 at 7x7, batch 1), the Winograd rule keeps its own (64 @ 14x14);
    the lowering as on an AMX host (self.amx), kernels built with EmulatedTiles."""
    from functools import partial

    from megtrace.relay_bridge.cpu import lower
    monkeypatch.setenv(amx_conv.ENV, env)
    monkeypatch.setattr(lower.amx_conv, "conv2d_amx",
                        partial(amx_conv.conv2d_amx, emulate=True))
    real_init = lower._CpuLowering.__init__

    def as_on_an_amx_host(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.amx = True
    monkeypatch.setattr(lower._CpuLowering, "__init__", as_on_an_amx_host)
    rules = []
    for n, c, hw, oc, stride in ((1, 64, 28, 64, 2), (1, 64, 14, 64, 1), (1, 512, 7, 512, 1)):
        x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
        w = (rng.standard_normal((oc, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
        cg = compile_graph(conv_graph(x, w, np.zeros((1, oc, 1, 1), np.float32), stride, 1,
                                      False), rules=True)
        rules.append(cg.rules[1])
        want_y = np.maximum(conv_ref(x, w, (stride, stride), (1, 1)), 0)
        assert rel_err(cg(x)[0], want_y) <= 2e-5
    assert rules == want
