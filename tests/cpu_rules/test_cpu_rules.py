"""megtrace.relay_bridge.cpu: every rule against a float64 NumPy reference, the NCHW16c layout kept
across ops (including channel counts that are not multiples of 16), fallbacks to the
default path, and whole models compiled vs eager."""
import logging

import numpy as np
import pytest
from conftest import rel_err
from conv_reference import conv_ref
from models import MLP, ConvNet, GapNet, randomize_bn

import megtrace as mge
from megtrace.ir import Graph, TensorType
from megtrace.jit import trace
from megtrace.ops import get
from megtrace.relay_bridge import compile_graph

TOL = 1e-5


# -- inputs, a graph builder, the check (float64 references: conv_reference.py) --------
def f32(rng, *shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


class G:
    """A tiny graph builder: inputs, constants and ops by name."""

    def __init__(self):
        self.g = Graph()

    def input(self, array, name="x"):
        return self.g.add_input(TensorType.of(array), name)

    def const(self, array):
        return self.g.add_const(array)

    def op(self, name, *inputs, **params):
        return self.g.add_node(get(name), list(inputs), params)[0]

    def compile(self, *outputs, **kw):
        self.g.set_outputs(list(outputs), [f"y{i}" for i in range(len(outputs))])
        return compile_graph(self.g, **kw)


def check(got, want):
    assert np.isfinite(got).all()
    assert rel_err(got, want) <= TOL


# -- conv2d (groups=1) -------------------------------------------------------------------
CONVS = [  # n, c, h, w, oc, k, stride, pad
    (1, 3, 16, 16, 16, 3, 1, 1),        # RGB input, fewer than 16 channels
    (2, 24, 11, 13, 40, 3, 2, 1),       # channels not multiples of 16, stride 2, batch 2
    (1, 20, 9, 9, 33, 1, 1, 0),         # 1x1
    (1, 32, 8, 10, 16, 1, 2, 0),        # 1x1 stride 2
    (1, 5, 23, 21, 8, 7, 2, 3),         # 7x7 stride 2 (a ResNet stem)
    (1, 16, 17, 31, 16, 3, 1, 1),       # a row that needs width padding (31 columns)
    (2, 40, 7, 7, 64, 3, 1, 1),         # narrow rows: 2 channel blocks per register tile
    (1, 96, 6, 6, 32, 1, 1, 0),         # the same with a 1x1 kernel, 6 columns
    (2, 48, 7, 7, 128, 1, 1, 0),        # 1x1 on a 7x7 map (MobileNet): channels outermost
    (2, 24, 5, 5, 64, 3, 1, 0),         # 3-column rows: 4 channel blocks per tile
    (2, 272, 2, 2, 272, 3, 1, 1),       # a wide weight on a small map: channels outermost
    (3, 200, 1, 1, 256, 3, 1, 1),       # the same on a 1x1 map (a training step's late layers)
    (4, 32, 18, 18, 64, 16, 1, 0),      # a 64-channel weight gradient: half the blocks per tile
    # stacked tiles (conv.stacked_tile): rows of at most 4 columns stack rows, then images
    (4, 32, 2, 2, 48, 3, 1, 1),         # 2x2 map, 3 (odd) channel blocks: 2 rows x 4 images
    (8, 40, 1, 1, 64, 1, 1, 0),         # 1x1 map: 8 images per tile
    (2, 20, 6, 3, 32, 3, 1, 1),         # 3 columns: 3 of the 6 rows per tile
    (6, 32, 4, 4, 32, 3, 2, 1),         # stride 2 onto 2x2: 2 rows x 2 of the 6 images
    (5, 24, 3, 2, 32, 3, 1, 1),         # 3 rows (odd), 5 images (prime): rows only
]


def test_tile_choices_of_the_added_shapes():
    """The last four CONVS exercise the schedules they are there for."""
    from megtrace.relay_bridge.cpu.conv import (ConvShape, channel_blocks, channels_outer,
                                                tile_order)
    assert channel_blocks(3, 4, 16) == 4 and channel_blocks(2, 17, 16) == 1
    wide = ConvShape(2, 272, 2, 2, 272, 3, 3, padding=(1, 1))
    assert channels_outer(wide, 4 * 4) and channels_outer(
        ConvShape(3, 200, 1, 1, 256, 3, 3, padding=(1, 1)), 3 * 3)
    assert not channels_outer(ConvShape(1, 64, 56, 56, 64, 3, 3, padding=(1, 1)), 58 * 58)
    # 1x1 convs on small maps go by traffic even when the weight fits L2; larger maps do not
    assert channels_outer(ConvShape(2, 48, 7, 7, 128, 1, 1), 7 * 7)
    assert not channels_outer(ConvShape(1, 384, 14, 14, 64, 1, 1), 14 * 14)   # 4 blocks
    assert channels_outer(ConvShape(1, 160, 7, 7, 960, 1, 1), 7 * 7)
    assert not channels_outer(ConvShape(1, 24, 56, 56, 144, 1, 1), 56 * 56)
    assert not channels_outer(ConvShape(1, 40, 7, 7, 64, 3, 3, padding=(1, 1)), 9 * 9)
    # 3-column rows of 4 channel blocks on a weight past L2: 2 blocks per tile, outermost
    assert tile_order(ConvShape(4, 32, 18, 18, 64, 16, 16), 3, 18 * 18, 16) == (2, True)
    assert tile_order(ConvShape(2, 24, 5, 5, 64, 3, 3), 3, 5 * 5, 16) == (4, False)


def test_stacked_tiles_of_the_added_shapes():
    """Short rows stack output rows, then images, up to STACKED_ACCUMULATORS; wide rows
    and AVX2 keep the one-row tile."""
    from megtrace.relay_bridge.cpu.conv import STACKED_ACCUMULATORS, ConvShape, stacked_tile, stacks
    assert stacks(4, 16) and not stacks(5, 16) and not stacks(2, 8)
    assert stacked_tile(ConvShape(4, 32, 2, 2, 48, 3, 3, padding=(1, 1)), 2, 1) == (2, 4)
    assert stacked_tile(ConvShape(32, 512, 2, 2, 512, 3, 3, padding=(1, 1)), 2, 2) == (2, 2)
    assert stacked_tile(ConvShape(8, 40, 1, 1, 64, 1, 1), 1, 2) == (1, 8)
    assert stacked_tile(ConvShape(2, 20, 6, 3, 32, 3, 3, padding=(1, 1)), 3, 2) == (3, 1)
    assert stacked_tile(ConvShape(6, 32, 4, 4, 32, 3, 3, (2, 2), (1, 1)), 2, 2) == (2, 2)
    assert stacked_tile(ConvShape(5, 24, 3, 2, 32, 3, 3, padding=(1, 1)), 2, 2) == (3, 1)
    # a training step's 3x3 weight gradient (batch as channels): 3 rows x 3 columns x 2
    assert stacked_tile(ConvShape(64, 32, 16, 16, 64, 16, 16, padding=(1, 1)), 3, 2) == (3, 1)
    assert 3 * 3 * 2 <= STACKED_ACCUMULATORS


def test_stacked_tile_with_residual_epilogue_and_prefetch(rng):
    """A stacked channels-outermost tile still prefetches the next channel tile's weight
    (its fused loop is named after the split image loop), and a residual add and relu in
    the epilogue run on the stacked tile."""
    from megtrace.relay_bridge.cpu.conv import ConvShape, conv2d_nchwc
    assert "llvm.prefetch" in conv2d_nchwc(ConvShape(8, 64, 1, 1, 128, 1, 1)).script()
    x, w0 = f32(rng, 4, 3, 2, 2), f32(rng, 64, 3, 1, 1)     # batch 4: not split by position
    w1, w2 = f32(rng, 128, 64, 1, 1), f32(rng, 128, 128, 3, 3)
    b = G()
    y = b.op("relu", b.op("conv2d", b.input(x), b.const(w0)))       # blocked from here on
    z = b.op("conv2d", y, b.const(w1))
    out = b.op("relu", b.op("add", b.op("conv2d", z, b.const(w2), padding=(1, 1)), z))
    cg = b.compile(out)
    assert cg.rules == ["conv", "conv", "conv"]
    r = conv_ref(np.maximum(conv_ref(x, w0), 0), w1)
    check(cg(x)[0], np.maximum(conv_ref(r, w2, padding=(1, 1)) + r, 0))


def test_pointwise_convs_on_short_rows_run_as_one_row_of_pixels():
    """conv.flattened: a 1x1, stride-1, unpadded conv (blocked or plain input) becomes one row
    of h*w pixels only where that pads fewer tile columns (AVX2's 4-6 column tiles on
    MobileNetV2's 7- and 14-wide rows); never a strided, padded or wider one."""
    from megtrace.relay_bridge.cpu.conv import ConvShape, flattened, padded_columns
    late = ConvShape(1, 160, 7, 7, 960, 1, 1)
    flat = flattened(late, 8)
    assert (flat.h, flat.w, flat.oh, flat.ow) == (1, 49, 1, 49)
    assert (padded_columns(late, 8), padded_columns(flat, 8)) == (56, 50)
    assert flat.flops == late.flops and flat.out_shape[-3:-1] == (1, 49)
    assert flattened(ConvShape(1, 96, 14, 14, 576, 1, 1), 8).w == 196       # 210 -> 196
    assert flattened(ConvShape(1, 24, 56, 56, 144, 1, 1), 8) is None        # 56 = 14 x 4
    assert flattened(late, 16) is None          # AVX-512: 7 columns, one tile, no padding
    assert flattened(ConvShape(1, 160, 7, 7, 960, 3, 3, padding=(1, 1)), 8) is None
    assert flattened(ConvShape(1, 160, 14, 14, 960, 1, 1, stride=(2, 2)), 8) is None
    assert flattened(ConvShape(1, 160, 7, 7, 960, 1, 1, padding=(1, 1)), 8) is None
    # a plain NCHW input (batch 8 after split_batch's concat) is contiguous by pixel too
    assert flattened(ConvShape(8, 576, 7, 7, 160, 1, 1, blocked_input=False), 8).w == 49


@pytest.mark.parametrize("lanes", [8, 16], ids=["avx2_tiles", "avx512_tiles"])
def test_flattened_pointwise_conv_keeps_its_epilogue_and_layout(lanes, rng, monkeypatch):
    """A 1x1 conv on a 7x7 map with a bias, a residual add of its blocked input and a
    ReLU in the epilogue, at batch 2: with AVX2 tiles it runs as a 49-pixel row (input,
    residual and output reshaped), with AVX-512 ones on the map's rows; the same values."""
    from megtrace.relay_bridge.cpu import conv, lower
    monkeypatch.setattr(conv, "vector_lanes", lambda: lanes)
    made = []
    monkeypatch.setattr(lower, "vector_lanes", lambda: lanes)
    monkeypatch.setattr(lower, "flattened",
                        lambda shape, ln: made.append(conv.flattened(shape, ln)) or made[-1])
    x, w0 = f32(rng, 2, 3, 7, 7), f32(rng, 40, 3, 1, 1)
    w1, b1 = f32(rng, 40, 40, 1, 1), f32(rng, 1, 40, 1, 1)
    b = G()
    y = b.op("relu", b.op("conv2d", b.input(x), b.const(w0)))       # blocked from here on
    out = b.op("relu", b.op("add", b.op("add", b.op("conv2d", y, b.const(w1)), b.const(b1)), y))
    cg = b.compile(out)
    assert cg.rules == ["conv", "conv"]
    assert [m is not None for m in made] == [lanes == 8, lanes == 8]    # the RGB one too
    r = np.maximum(conv_ref(x, w0), 0)
    check(cg(x)[0], np.maximum(conv_ref(r, w1) + b1 + r, 0))


def test_flattened_pointwise_conv_on_a_plain_input(rng, monkeypatch):
    """A graph input (NCHW, packed inside the kernel) into a 1x1 conv on a 7x7 map with
    AVX2 tiles: one 49-pixel row per image, the same values."""
    from megtrace.relay_bridge.cpu import conv, lower
    monkeypatch.setattr(conv, "vector_lanes", lambda: 8)
    monkeypatch.setattr(lower, "vector_lanes", lambda: 8)
    made = []
    monkeypatch.setattr(lower, "flattened",
                        lambda shape, ln: made.append(conv.flattened(shape, ln)) or made[-1])
    x, w, bias = f32(rng, 3, 40, 7, 7), f32(rng, 24, 40, 1, 1), f32(rng, 1, 24, 1, 1)
    b = G()
    cg = b.compile(b.op("relu", b.op("add", b.op("conv2d", b.input(x), b.const(w)),
                                     b.const(bias))))
    assert cg.rules == ["conv"] and [(m.blocked_input, m.w) for m in made] == [(False, 49)]
    check(cg(x)[0], np.maximum(conv_ref(x, w) + bias, 0))


@pytest.mark.parametrize("n,c,h,w,oc,k,s,p", CONVS, ids=[f"{c[1]}to{c[4]}k{c[5]}s{c[6]}"
                                                           for c in CONVS])
def test_conv_rule_matches_reference(n, c, h, w, oc, k, s, p, rng):
    x, wt, bias = f32(rng, n, c, h, w), f32(rng, oc, c, k, k), f32(rng, 1, oc, 1, 1)
    b = G()
    y = b.op("relu", b.op("add", b.op("conv2d", b.input(x), b.const(wt), stride=(s, s),
                                      padding=(p, p)), b.const(bias)))
    cg = b.compile(y)
    assert cg.pipeline == "cpu-rules" and cg.rules == ["conv"]
    check(cg(x)[0], np.maximum(conv_ref(x, wt, (s, s), (p, p)) + bias, 0))


@pytest.mark.parametrize("c,k,s,p,icb", [(24, 1, 1, 0, 8), (40, 3, 1, 1, 8), (20, 3, 2, 1, 4),
                                         (8, 1, 1, 0, 8), (18, 1, 1, 0, 16)])
def test_conv_on_blocked_input_reduces_over_its_real_channels(c, k, s, p, icb, rng):
    """A blocked input of 24 channels is reduced in 3 steps of 8, not 2 blocks of 16
    whose last 8 lanes are zero padding (layout.reduce_block)."""
    from megtrace.relay_bridge.cpu.conv import ConvShape
    shape = ConvShape(1, c, 13, 12, 32, k, k, (s, s), (p, p))
    assert shape.icb == icb and shape.weight_shape[1] == -(-c // icb)
    x, w0, w1 = f32(rng, 1, 3, 13, 12), f32(rng, c, 3, 1, 1), f32(rng, 32, c, k, k)
    b = G()
    y = b.op("relu", b.op("conv2d", b.input(x), b.const(w0)))       # blocked from here on
    cg = b.compile(b.op("conv2d", y, b.const(w1), stride=(s, s), padding=(p, p)))
    assert cg.rules == ["conv", "conv"]
    want = conv_ref(np.maximum(conv_ref(x, w0), 0), w1, (s, s), (p, p))
    check(cg(x)[0], want)
    b = G()                                 # a runtime weight, packed in the graph
    y = b.op("relu", b.op("conv2d", b.input(x), b.const(w0)))
    cg = b.compile(b.op("conv2d", y, b.input(w1, "w"), stride=(s, s), padding=(p, p)))
    check(cg(x, w1)[0], want)


def test_channels_outer_conv_prefetches_the_next_tiles_weights(rng):
    """MobileNetV2's 7x7 expanding 1x1 convs ask for the next channel tile's weight
    slice while computing this one; slices over weight_prefetch.MAX_SLICE_BYTES and
    rows-outermost convs do not (conv.channels_outer)."""
    from megtrace.relay_bridge.cpu.conv import ConvShape, conv2d_nchwc
    assert "llvm.prefetch" in conv2d_nchwc(ConvShape(1, 160, 7, 7, 960, 1, 1)).script()
    assert "llvm.prefetch" in conv2d_nchwc(ConvShape(1, 64, 7, 7, 144, 1, 1)).script()  # kb 1
    assert "llvm.prefetch" not in conv2d_nchwc(ConvShape(1, 960, 7, 7, 320, 1, 1)).script()
    assert "llvm.prefetch" not in conv2d_nchwc(ConvShape(1, 64, 56, 56, 64, 1, 1)).script()
    x, w0 = f32(rng, 2, 3, 7, 7), f32(rng, 160, 3, 1, 1)
    w1, bias = f32(rng, 144, 160, 1, 1), f32(rng, 1, 144, 1, 1)
    b = G()
    y = b.op("relu", b.op("conv2d", b.input(x), b.const(w0)))       # blocked from here on
    cg = b.compile(b.op("add", b.op("conv2d", y, b.const(w1)), b.const(bias)))
    assert cg.rules == ["conv", "conv"]
    check(cg(x)[0], conv_ref(np.maximum(conv_ref(x, w0), 0), w1) + bias)


def test_conv_with_runtime_weight_packs_it_in_the_graph(rng):
    x, wt = f32(rng, 1, 24, 10, 10), f32(rng, 20, 24, 3, 3)
    b = G()
    cg = b.compile(b.op("conv2d", b.input(x), b.input(wt, "w"), padding=(1, 1)))
    assert cg.rules == ["conv"]
    check(cg(x, wt)[0], conv_ref(x, wt, padding=(1, 1)))


def test_blocked_layout_persists_and_padded_channels_stay_zero(rng):
    """24 and 40 channels leave 8 padded lanes per block; log(0) = -inf there would turn
    the next conv into NaN if the epilogue did not keep padded channels at zero."""
    x = f32(rng, 1, 3, 12, 12)
    w1, w2, w3 = f32(rng, 24, 3, 3, 3), f32(rng, 40, 24, 1, 1), f32(rng, 40, 40, 3, 3)
    mean, var = f32(rng, 1, 24, 1, 1), f32(rng, 1, 24, 1, 1, lo=0.5, hi=2.0)
    gamma, beta = f32(rng, 1, 24, 1, 1), f32(rng, 1, 24, 1, 1)
    b = G()
    y = b.op("conv2d", b.input(x), b.const(w1), padding=(1, 1))
    y = b.op("batch_norm", y, b.const(gamma), b.const(beta), b.const(mean), b.const(var))
    y = b.op("log", b.op("add", b.op("abs", y), b.const(np.float32(0.5))))
    z = b.op("sigmoid", b.op("conv2d", y, b.const(w2)))
    out = b.op("relu", b.op("add", b.op("conv2d", z, b.const(w3), padding=(1, 1)), z))
    cg = b.compile(out)
    assert cg.rules == ["conv", "conv", "conv"]
    r = conv_ref(x, w1, padding=(1, 1))
    r = (r - mean) / np.sqrt(var.astype(np.float64) + 1e-5) * gamma + beta
    r = 1 / (1 + np.exp(-conv_ref(np.log(np.abs(r) + 0.5), w2)))
    check(cg(x)[0], np.maximum(conv_ref(r, w3, padding=(1, 1)) + r, 0))


def test_inference_batch_norm_scale_is_in_the_conv_weights(rng):
    """conv -> batch_norm -> clip and depthwise -> batch_norm: each kernel's epilogue
    takes one shift vector (the scale is folded into the packed weights), not mean,
    scale and beta; results as computed in float64 from the unfolded graph."""
    from megtrace.relay_bridge.pipelines import lower_graph
    from megtrace.relay_bridge.targets import resolve
    x, w, dw = f32(rng, 1, 3, 10, 10), f32(rng, 24, 3, 3, 3), f32(rng, 24, 1, 1, 3, 3)
    stats = [(f32(rng, 1, 24, 1, 1), f32(rng, 1, 24, 1, 1), f32(rng, 1, 24, 1, 1),
              f32(rng, 1, 24, 1, 1, lo=0.5, hi=2.0)) for _ in range(2)]
    b = G()

    def bn(y, i):
        gamma, beta, mean, var = stats[i]
        return b.op("batch_norm", y, b.const(gamma), b.const(beta), b.const(mean),
                    b.const(var))
    y = b.op("clip", bn(b.op("conv2d", b.input(x), b.const(w), padding=(1, 1)), 0),
             lower=0.0, upper=6.0)
    y = bn(b.op("conv2d", y, b.const(dw), padding=(1, 1)), 1)
    cg = b.compile(y)
    assert cg.rules == ["conv", "depthwise"]
    mod, _ = lower_graph(b.g, resolve(None), "rules")
    kernels = {str(f.attrs["megtrace.rule"]): f for f in mod.functions.values()
               if f.attrs is not None and "megtrace.rule" in f.attrs}
    # (input, packed weight, shift, output)
    assert len(kernels["conv2d_nchw16c"].params) == 4
    assert len(kernels["depthwise_nchw16c"].params) == 4

    def ref_bn(r, i):
        gamma, beta, mean, var = (a.astype(np.float64) for a in stats[i])
        return (r - mean) / np.sqrt(var + 1e-5) * gamma + beta
    r = np.clip(ref_bn(conv_ref(x, w, padding=(1, 1)), 0), 0, 6)
    check(cg(x)[0], ref_bn(conv_ref(r, dw, padding=(1, 1)), 1))


def test_rule_kernels_carry_the_useful_flops_of_their_op(rng):
    """primfunc.mark's "megtrace.flops" (bench/profile_kernels.py's GFLOP/s): 2 per
    multiply-add of the op as written, not of the padded tiles (20 channels in two
    blocks of 16, 9 columns in tiles of 4-16) nor of a fused pair's two halves apart."""
    from megtrace.relay_bridge.cpu.primfunc import FLOPS_ATTR
    from megtrace.relay_bridge.pipelines import lower_graph
    from megtrace.relay_bridge.targets import resolve
    x, w = f32(rng, 2, 20, 9, 9), f32(rng, 33, 20, 3, 3)
    dw, a, m = f32(rng, 33, 1, 1, 3, 3), f32(rng, 5, 70), f32(rng, 70, 21)
    b = G()
    y = b.op("conv2d", b.op("conv2d", b.input(x), b.const(w), padding=(1, 1)), b.const(dw),
             stride=(2, 2), padding=(1, 1))
    z = b.op("matmul", b.input(a, "a"), b.const(m))
    b.g.set_outputs([y, z], ["y", "z"])
    flops = {}

    def on_kernel(name, func):           # packs and unpacks are no rule's kernels
        if func.attrs is not None and "megtrace.rule" in func.attrs:
            flops[str(func.attrs["megtrace.rule"])] = int(func.attrs[FLOPS_ATTR])
    lower_graph(b.g, resolve(None), "rules", on_kernel=on_kernel)
    assert flops == {"conv2d_nchw16c": 2 * 2 * 33 * 20 * 3 * 3 * 9 * 9,
                     "depthwise_nchw16c": 2 * 2 * 33 * 9 * 5 * 5,
                     "dense_packed": 2 * 5 * 70 * 21}


def test_value_with_two_users_stays_blocked(rng):
    x, wt, scale = f32(rng, 1, 8, 9, 9), f32(rng, 20, 8, 3, 3), f32(rng, 1, 20, 1, 1)
    b = G()
    y = b.op("conv2d", b.input(x), b.const(wt))
    cg = b.compile(b.op("add", b.op("relu", y), b.op("mul", y, b.const(scale))))
    assert "conv" in cg.rules and cg.rules.count("elementwise_nchw16c") == 3
    r = conv_ref(x, wt)
    check(cg(x)[0], np.maximum(r, 0) + r * scale)


def _op_or_skip(name):
    from megtrace.errors import UnsupportedOpError
    try:
        get(name)
    except UnsupportedOpError:
        pytest.skip(f"megtrace has no {name} op")


@pytest.mark.parametrize("nonline", ["IDENTITY", "RELU", "SIGMOID"])
def test_megengine_fused_oprs_fold_into_the_conv(nonline, rng):
    """ConvBias and the FUSE_* Elemwise modes of optimized .mge files."""
    _op_or_skip("conv_bias")
    _op_or_skip("fuse_add_relu")
    _op_or_skip("fuse_mul_add3")
    x, wt, bias = f32(rng, 1, 8, 10, 10), f32(rng, 24, 8, 3, 3), f32(rng, 1, 24, 1, 1)
    scale, shift = f32(rng, 1, 24, 1, 1), f32(rng, 1, 24, 1, 1)
    b = G()
    xv = b.input(x)
    y = b.op("conv_bias", xv, b.const(wt), b.const(bias), padding=(1, 1), nonline=nonline)
    y = b.op("fuse_mul_add3", y, b.const(scale), b.const(shift))
    res = b.op("conv2d", xv, b.const(f32(rng, 24, 8, 1, 1)))
    y = b.op("fuse_add_relu", y, res)
    cg = b.compile(y)
    assert cg.rules == ["conv", "conv"]
    r = conv_ref(x, wt, padding=(1, 1)) + bias
    r = {"IDENTITY": r, "RELU": np.maximum(r, 0), "SIGMOID": 1 / (1 + np.exp(-r))}[nonline]
    w2 = b.g.consts[b.g.nodes[2].inputs[1]]
    check(cg(x)[0], np.maximum(r * scale + shift + conv_ref(x, w2), 0))


# -- depthwise ---------------------------------------------------------------------------
@pytest.mark.parametrize("c,s", [(8, 1), (20, 2), (32, 1)])
def test_depthwise_rule_after_conv(c, s, rng):
    x, w1, dw = f32(rng, 2, 3, 14, 15), f32(rng, c, 3, 1, 1), f32(rng, c, 1, 1, 3, 3)
    b = G()
    y = b.op("conv2d", b.input(x), b.const(w1))
    y = b.op("clip", b.op("conv2d", y, b.const(dw), stride=(s, s), padding=(1, 1)),
             lower=0.0, upper=6.0)
    cg = b.compile(y)
    assert cg.rules == ["conv", "depthwise"]
    check(cg(x)[0], np.clip(conv_ref(conv_ref(x, w1), dw, (s, s), (1, 1)), 0, 6))


@pytest.mark.parametrize("n,c,h,w,e,s", [(1, 16, 28, 28, 96, 2), (2, 24, 14, 15, 40, 1),
                                         (1, 32, 7, 7, 192, 1), (1, 8, 13, 11, 48, 2),
                                         (1, 16, 26, 26, 32, 2), (1, 20, 9, 10, 32, 1),
                                         (1, 40, 8, 8, 48, 2)])
@pytest.mark.parametrize("lanes", [8, 16], ids=["avx2_tiles", "avx512_tiles"])
def test_expand_depthwise_pair_is_one_kernel(n, c, h, w, e, s, lanes, rng, monkeypatch):
    """1x1 conv (+bias, ReLU6) feeding a 3x3 depthwise (+bias, ReLU6): one fused kernel
    (at any size here; models fuse only pairs whose expanded tensor leaves the cache),
    with either host's tiling."""
    from megtrace.relay_bridge.cpu import pointwise_depthwise
    monkeypatch.setattr(pointwise_depthwise, "vector_lanes", lambda: lanes)
    monkeypatch.setattr(pointwise_depthwise, "MIN_EXPANDED_BYTES", 0)
    monkeypatch.setattr(pointwise_depthwise, "MIN_IMAGE_EXPANDED_BYTES", 0)
    x, w0 = f32(rng, n, 3, h, w), f32(rng, c, 3, 1, 1)
    w1, dw = f32(rng, e, c, 1, 1), f32(rng, e, 1, 1, 3, 3)
    b1, b2 = f32(rng, 1, e, 1, 1), f32(rng, 1, e, 1, 1)
    b = G()
    y = b.op("relu", b.op("conv2d", b.input(x), b.const(w0)))       # blocked from here on
    y = b.op("clip", b.op("add", b.op("conv2d", y, b.const(w1)), b.const(b1)),
             lower=0.0, upper=6.0)
    y = b.op("clip", b.op("add", b.op("conv2d", y, b.const(dw), stride=(s, s),
                                      padding=(1, 1)), b.const(b2)), lower=0.0, upper=6.0)
    cg = b.compile(y)
    assert cg.rules == ["conv", "expand_depthwise"]
    mid = np.clip(conv_ref(np.maximum(conv_ref(x, w0), 0), w1) + b1, 0, 6)
    check(cg(x)[0], np.clip(conv_ref(mid, dw, (s, s), (1, 1)) + b2, 0, 6))


@pytest.mark.parametrize("lanes,shape,reg,owp,w2", [
    (16, (1, 16, 112, 112, 96, 2), 4, 56, 112), (16, (1, 24, 56, 56, 144, 1), 4, 56, 56),
    (16, (1, 24, 56, 56, 144, 2), 4, 28, 56), (16, (1, 16, 26, 26, 32, 2), 7, 14, 26),
    (16, (1, 8, 13, 11, 48, 2), 3, 6, 11), (16, (1, 32, 7, 7, 192, 1), 7, 7, 8),
    (8, (1, 16, 112, 112, 96, 2), 4, 56, 112), (8, (1, 24, 56, 56, 144, 1), 4, 56, 56),
    (8, (1, 24, 56, 56, 144, 2), 4, 28, 56), (8, (1, 16, 26, 26, 32, 2), 2, 14, 26),
    (8, (1, 8, 13, 11, 48, 2), 3, 6, 12), (8, (1, 32, 7, 7, 192, 1), 4, 8, 8)])
def test_expand_depthwise_tiling_computes_only_input_columns(lanes, shape, reg, owp, w2,
                                                              monkeypatch):
    """The 1x1 tile covers the input's columns (MobileNetV2's 112/56-wide rows: 14-column
    tiles with AVX-512, 4-column ones with AVX2 (16 ymm), none extra; the depthwise conv's
    padding columns are a guard, not computed: the 112 s2 pair computed 117 columns for
    113 before, clamped reads made the tile's columns separate addresses), and a strip
    computes only the rows it reads. Either host's tiling, whatever the host."""
    from megtrace.relay_bridge.cpu import pointwise_depthwise
    from megtrace.relay_bridge.cpu.pointwise_depthwise import PairShape, strip_rows, tiling
    monkeypatch.setattr(pointwise_depthwise, "vector_lanes", lambda: lanes)
    # accumulators of the widest 1x1 tile (16 channels: 16 // lanes registers a column)
    # leave room for the broadcast and the weights in 32 zmm / 16 ymm
    assert max(pointwise_depthwise.REG1_CHOICES[lanes]) * (16 // lanes) <= {16: 16, 8: 12}[lanes]
    pair = PairShape(*shape)
    t = tiling(pair)
    assert (t.reg, t.owp, t.w2) == (reg, owp, w2)
    assert pair.w <= t.w2 < pair.w + t.reg1 and t.w2 % t.reg1 == 0
    assert pair.oh % t.rows == 0
    assert strip_rows(t.rows, pair.stride) == (t.rows - 1) * pair.stride + 3


@pytest.mark.parametrize("c,icb,steps", [(24, 8, 3), (20, 4, 5), (16, 16, 1), (96, 16, 6),
                                          (18, 16, 2)])
def test_expand_depthwise_reduction_skips_channel_padding(c, icb, steps):
    """MobileNetV2's 24-channel input: 3 steps of 8 channels, not 2 blocks of 16 of which
    8 are zero padding (56x56 pairs 0.39 -> 0.33 and 0.31 -> 0.25 ms); a gcd below 4 keeps
    whole blocks."""
    from megtrace.relay_bridge.cpu.layout import reduce_block
    from megtrace.relay_bridge.cpu.pointwise_depthwise import PairShape, expand_depthwise
    assert reduce_block(c) == icb
    func = expand_depthwise(PairShape(1, c, 10, 10, 32, 1))
    assert [int(d) for d in func.params[1].ty.shape] == [2, steps, 1, 1, icb, 16]


@pytest.mark.parametrize("n,h,e,fused", [(1, 14, 384, False), (8, 14, 384, False),
                                         (1, 28, 192, False), (8, 28, 192, True),
                                         (1, 56, 144, True)])
def test_expand_depthwise_fuses_where_the_expanded_tensor_leaves_the_cache(n, h, e, fused):
    """In all >= 1 MB and >= 512 KB an image (batch 8: 28x28 pairs fuse, 14x14 ones not)."""
    from megtrace.relay_bridge.cpu.pointwise_depthwise import PairShape, applies
    assert applies(PairShape(n, 64, h, h, e, 1)) == fused


def test_small_expand_depthwise_pairs_stay_separate(rng):
    x, w0 = f32(rng, 1, 3, 14, 14), f32(rng, 64, 3, 1, 1)
    w1, dw = f32(rng, 384, 64, 1, 1), f32(rng, 384, 1, 1, 3, 3)
    b = G()
    y = b.op("relu", b.op("conv2d", b.input(x), b.const(w0)))
    y = b.op("relu", b.op("conv2d", y, b.const(w1)))
    cg = b.compile(b.op("conv2d", y, b.const(dw), padding=(1, 1)))
    assert cg.rules == ["conv", "conv", "depthwise"]


def test_expand_output_used_twice_is_not_fused(rng, monkeypatch):
    from megtrace.relay_bridge.cpu import pointwise_depthwise
    monkeypatch.setattr(pointwise_depthwise, "MIN_EXPANDED_BYTES", 0)
    monkeypatch.setattr(pointwise_depthwise, "MIN_IMAGE_EXPANDED_BYTES", 0)
    x, w1, dw = f32(rng, 1, 16, 8, 8), f32(rng, 32, 16, 1, 1), f32(rng, 32, 1, 1, 3, 3)
    b = G()
    y = b.op("relu", b.op("conv2d", b.op("relu", b.op("conv2d", b.input(x),
                                                      b.const(f32(rng, 16, 16, 1, 1)))),
                          b.const(w1)))
    z = b.op("conv2d", y, b.const(dw), padding=(1, 1))
    cg = b.compile(z, y)
    assert "expand_depthwise" not in cg.rules


def test_lone_nchw_depthwise_uses_the_default_loop(rng):
    x, dw = f32(rng, 1, 16, 10, 10), f32(rng, 16, 1, 1, 3, 3)
    b = G()
    cg = b.compile(b.op("conv2d", b.input(x), b.const(dw), padding=(1, 1)))
    assert cg.pipeline == "cpu-rules" and cg.rules == []
    check(cg(x)[0], conv_ref(x, dw, padding=(1, 1)))


# -- dense / matmul ----------------------------------------------------------------------
DENSE = [  # a shape, weight shape, transpose_b
    ((1, 512), (1000, 512), True),      # GEMV (nr = 40 chunks)
    ((1, 64), (10, 64), True),          # GEMV narrower than a chunk
    ((13, 37), (70, 37), True),         # GEMM, M and N not multiples of the 8x32 tile
    ((64, 96), (96, 128), False),       # weight (K, N)
    ((2, 5, 48), (24, 48), True),       # leading batch axes
]


@pytest.mark.parametrize("ashape,wshape,tb", DENSE, ids=["gemv", "gemv-narrow", "gemm-odd",
                                                          "kn-weight", "batched"])
def test_dense_rule_matches_reference(ashape, wshape, tb, rng):
    a, wt = f32(rng, *ashape), f32(rng, *wshape)
    n = wshape[0] if tb else wshape[1]
    bias = f32(rng, n)
    b = G()
    y = b.op("matmul", b.input(a), b.const(wt), transpose_b=tb)
    cg = b.compile(b.op("relu", b.op("add", y, b.const(bias))))
    assert cg.rules == ["dense"]
    w64 = wt.astype(np.float64)
    check(cg(a)[0], np.maximum(a.astype(np.float64) @ (w64.T if tb else w64) + bias, 0))


BMM = [  # a shape, b shape, transpose_a, transpose_b
    ((12, 32, 16), (12, 32, 16), False, True),      # attention scores q @ k^T
    ((12, 32, 32), (12, 32, 16), False, False),     # attention output p @ v
    ((2, 3, 13, 17), (3, 17, 20), False, False),    # broadcast batch, odd M/N
    ((2, 1, 17, 13), (4, 20, 17), True, True),      # both transposed, broadcast both ways
    ((5, 7), (7, 40), False, False),                # plain 2-d, runtime weight
]


@pytest.mark.parametrize("ashape,bshape,ta,tb", BMM, ids=["qk", "pv", "bcast", "tt", "2d"])
def test_matmul_rule_for_runtime_operands(ashape, bshape, ta, tb, rng):
    a, c = f32(rng, *ashape), f32(rng, *bshape)
    b = G()
    y = b.op("matmul", b.input(a), b.input(c, "c"), transpose_a=ta, transpose_b=tb)
    cg = b.compile(b.op("mul", y, b.const(np.float32(0.125))))
    assert cg.rules == ["matmul"]
    a64 = np.swapaxes(a, -1, -2) if ta else a
    c64 = np.swapaxes(c, -1, -2) if tb else c
    check(cg(a, c)[0], np.matmul(a64.astype(np.float64), c64) * 0.125)


def test_integer_matmul_uses_the_default_path(rng):
    a = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    c = rng.integers(-5, 5, (4, 6)).astype(np.int32)
    b = G()
    cg = b.compile(b.op("matmul", b.input(a), b.input(c, "c")))
    assert cg.rules == []
    assert np.array_equal(cg(a, c)[0], a @ c)


# -- pooling and global reductions on NCHW16c --------------------------------------------
@pytest.mark.parametrize("mode,k,s,p", [("max", 3, 2, 1), ("average", 2, 2, 0),
                                        ("average_count_exclude_padding", 3, 1, 1)])
def test_pool_stays_blocked(mode, k, s, p, rng):
    x, wt = f32(rng, 1, 3, 13, 13), f32(rng, 20, 3, 3, 3)
    b = G()
    y = b.op("conv2d", b.input(x), b.const(wt))
    cg = b.compile(b.op("pool2d", y, mode=mode, kernel=(k, k), stride=(s, s), padding=(p, p)))
    assert cg.rules == ["conv", "pool_nchw16c"]
    r = conv_ref(x, wt)
    fill = -np.inf if mode == "max" else 0.0
    rp = np.pad(r, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    ones = np.pad(np.ones(r.shape[2:]), p)
    oh = (rp.shape[2] - k) // s + 1
    want = np.zeros(r.shape[:2] + (oh, oh))
    for i in range(oh):
        for j in range(oh):
            win = rp[:, :, i * s:i * s + k, j * s:j * s + k]
            if mode == "max":
                want[:, :, i, j] = win.max(axis=(2, 3))
            elif mode == "average":
                want[:, :, i, j] = win.sum(axis=(2, 3)) / (k * k)
            else:
                want[:, :, i, j] = win.sum(axis=(2, 3)) / ones[i * s:i * s + k,
                                                                j * s:j * s + k].sum()
    check(cg(x)[0], want)


@pytest.mark.parametrize("mode,keepdims", [("mean", False), ("max", True), ("sum", False)])
def test_global_reduce_reads_blocked_input(mode, keepdims, rng):
    x, wt = f32(rng, 2, 3, 9, 9), f32(rng, 24, 3, 3, 3)
    b = G()
    y = b.op("conv2d", b.input(x), b.const(wt))
    cg = b.compile(b.op("reduce", y, mode=mode, axis=(2, 3), keepdims=keepdims))
    assert cg.rules == ["conv", "spatial_reduce_nchw16c"]
    want = getattr(np, mode)(conv_ref(x, wt), axis=(2, 3), keepdims=keepdims)
    check(cg(x)[0], want)


@pytest.mark.parametrize("mode", ["average", "max"])
def test_global_adaptive_pool_reads_blocked_input(mode, rng):
    _op_or_skip("adaptive_pool2d")
    x, wt = f32(rng, 1, 3, 7, 9), f32(rng, 40, 3, 1, 1)
    b = G()
    y = b.op("conv2d", b.input(x), b.const(wt))
    cg = b.compile(b.op("adaptive_pool2d", y, mode=mode, out=(1, 1)))
    assert cg.rules == ["conv", "spatial_reduce_nchw16c"]
    reduce = np.mean if mode == "average" else np.max
    check(cg(x)[0], reduce(conv_ref(x, wt), axis=(2, 3), keepdims=True))


# -- the generic rule --------------------------------------------------------------------
def test_generic_rule_threads_and_vectorises_leftover_kernels(rng):
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu.generic import schedule_generic
    te = tvm().te
    a = te.placeholder((64, 512), "float32", name="a")
    b = te.compute((64, 512), lambda i, j: a[i, j] * 2.0 + 1.0, name="b")
    k = te.reduce_axis((0, 512), "k")
    c = te.compute((64,), lambda i: te.sum(b[i, k], axis=k), name="c")
    sch = schedule_generic(te.create_prim_func([a, b]))
    text = sch.mod.script()
    assert "T.parallel" in text and "T.vectorized(16)" in text
    sch = schedule_generic(te.create_prim_func([a, c]))
    assert sch is not None                 # b inlined into the reduction, rows parallel
    assert "T.parallel(64)" in sch.mod.script()


@pytest.mark.parametrize("c,h,w,tiled", [(32, 32, 32, True), (16, 16, 64, True),
                                         (32, 16, 16, False), (32, 32, 3, False)])
def test_generic_rule_unpacks_a_large_map_channel_block_by_channel_block(c, h, w, tiled, rng):
    """An unpack from NCHW16c fused with an elementwise op, on a map whose channel-block
    plane passes L1, reads each block's 16 channels next to the vectorised row; small
    planes and rows that are not whole vectors keep the channels outside; the result is
    the unpacked product either way."""
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu.generic import schedule_generic
    from megtrace.relay_bridge.targets import resolve
    t = tvm()
    te = t.te
    n, cb = 2, c // 16
    x = te.placeholder((n, cb, h, w, 16), "float32", name="x")
    y = te.placeholder((n, cb, h, w, 16), "float32", name="y")
    out = te.compute((n, c, h, w), lambda a, ch, i, j: x[a, ch // 16, i, j, ch % 16]
                     * y[a, ch // 16, i, j, ch % 16], name="out")
    sch = schedule_generic(te.create_prim_func([x, y, out]))
    func = sch.mod["main"]
    assert ("T.vectorized(16)" in sch.mod.script()) == (w % 16 == 0)
    lib = t.compile(t.IRModule({"main": func.with_attr("global_symbol", "main")}),
                    target=resolve(None))
    xa, ya = f32(rng, n, cb, h, w, 16), f32(rng, n, cb, h, w, 16)
    got = t.runtime.tensor(np.zeros((n, c, h, w), "float32"))
    lib["main"](t.runtime.tensor(xa), t.runtime.tensor(ya), got)
    plain = lambda v: v.transpose(0, 1, 4, 2, 3).reshape(n, c, h, w)  # noqa: E731
    np.testing.assert_array_equal(got.numpy(), plain(xa) * plain(ya))
    # the channel index is a split loop (c // 16 * 16 + inner) only when tiled
    assert ("* 16 +" in sch.mod.script()) == tiled


def test_graph_without_anchors_is_correct(rng):
    x = f32(rng, 4, 32, 40)
    b = G()
    y = b.op("softmax", b.op("exp", b.op("mul", b.input(x), b.const(np.float32(0.5)))),
             axis=-1)
    cg = b.compile(y)
    assert cg.pipeline == "cpu-rules" and cg.rules == []
    e = np.exp(np.exp(x.astype(np.float64) * 0.5))
    check(cg(x)[0], e / e.sum(axis=-1, keepdims=True))


# -- fallbacks -----------------------------------------------------------------------------
def test_dilated_conv_falls_back_to_the_default_path(rng):
    x, wt = f32(rng, 1, 4, 12, 12), f32(rng, 8, 4, 3, 3)
    b = G()
    cg = b.compile(b.op("conv2d", b.input(x), b.const(wt), dilation=(2, 2)))
    assert cg.rules == []
    xp = x.astype(np.float64)
    want = np.einsum("nchw,oc->nohw", xp[:, :, 0:8, 0:8], wt[:, :, 0, 0])
    for a in range(3):
        for c in range(3):
            if a or c:
                want = want + np.einsum("nchw,oc->nohw", xp[:, :, 2 * a:2 * a + 8,
                                                            2 * c:2 * c + 8], wt[:, :, a, c])
    check(cg(x)[0], want)


def test_a_failing_rule_falls_back_without_changing_results(rng, monkeypatch, caplog):
    import megtrace.relay_bridge.cpu.lower as cpu_lower

    def broken(*args, **kwargs):
        raise RuntimeError("simulated rule bug")
    monkeypatch.setattr(cpu_lower, "conv2d_nchwc", broken)
    x, wt = f32(rng, 1, 16, 8, 8), f32(rng, 16, 16, 3, 3)
    b = G()
    with caplog.at_level(logging.WARNING):
        cg = b.compile(b.op("relu", b.op("conv2d", b.input(x), b.const(wt), padding=(1, 1))))
    assert cg.pipeline == "cpu-rules" and cg.rules == []
    assert "simulated rule bug" in caplog.text
    check(cg(x)[0], np.maximum(conv_ref(x, wt, padding=(1, 1)), 0))


def test_a_failing_rules_build_is_rebuilt_on_the_default_path(rng, monkeypatch, caplog):
    import megtrace.relay_bridge.cpu as cpu

    def broken_pipeline(target, **kwargs):
        raise RuntimeError("simulated pipeline bug")
    monkeypatch.setattr(cpu, "cpu_pipeline", broken_pipeline)
    x, wt = f32(rng, 1, 16, 8, 8), f32(rng, 16, 16, 1, 1)
    b = G()
    with caplog.at_level(logging.WARNING):
        cg = b.compile(b.op("conv2d", b.input(x), b.const(wt)))
    assert cg.pipeline == "default" and "simulated pipeline bug" in caplog.text
    check(cg(x)[0], conv_ref(x, wt))


def test_graph_errors_are_not_hidden_by_the_fallback(rng, monkeypatch):
    """A graph with an op that has no Relax lowering runs on the NumPy interpreter; forced
    through the lowering, its error reaches the caller from the rules path and from the
    default path alike (only the rules' own failures fall back)."""
    import megtrace.relay_bridge.build as build
    from megtrace.errors import UnsupportedOpError
    b = G()
    xv = f32(rng, 1, 3, 2, 2)
    x = b.input(xv)
    ones, zeros = np.ones((1, 3, 1, 1), np.float32), np.zeros((1, 3, 1, 1), np.float32)
    y = b.op("batch_norm_train", x, b.const(ones), b.const(zeros))   # no Relax lowering
    op = get("batch_norm_train")
    want = op.run_eager([xv, ones, zeros], dict(op.bind({})))[0]
    check(b.compile(y)(xv)[0], want)
    monkeypatch.setattr(build, "has_unlowered_ops", lambda graph: False)
    with pytest.raises(UnsupportedOpError, match="batch_norm_train"):
        b.compile(y)


def test_rules_can_be_switched_off(rng, monkeypatch):
    x, wt = f32(rng, 1, 16, 8, 8), f32(rng, 16, 16, 1, 1)
    b = G()
    y = b.op("conv2d", b.input(x), b.const(wt))
    assert b.compile(y, rules=False).pipeline == "default"
    monkeypatch.setenv("MEGTRACE_CPU_RULES", "0")
    cg = compile_graph(b.g)
    assert cg.pipeline == "default"
    check(cg(x)[0], conv_ref(x, wt))


def test_only_llvm_targets_take_the_rules(monkeypatch):
    from megtrace.relay_bridge.build import uses_cpu_rules
    from megtrace.relay_bridge.targets import resolve
    monkeypatch.delenv("MEGTRACE_CPU_RULES", raising=False)
    assert uses_cpu_rules(resolve(None))
    assert not uses_cpu_rules(resolve("cuda-sm90"))
    assert not uses_cpu_rules(resolve(None), rules=False)
    monkeypatch.setenv("MEGTRACE_CPU_RULES", "off")
    assert not uses_cpu_rules(resolve(None))


# -- whole models --------------------------------------------------------------------------
@pytest.mark.parametrize("model,shape,kinds", [
    (MLP, (3, 64), {"dense"}),
    (ConvNet, (2, 3, 32, 32), {"conv", "pool_nchw16c", "dense"}),
    (GapNet, (2, 3, 16, 16), {"conv", "depthwise", "spatial_reduce_nchw16c", "dense"}),
], ids=["mlp", "convnet", "gapnet"])
def test_models_compiled_with_rules_match_eager(model, shape, kinds, rng):
    net = randomize_bn(model(), rng).eval()
    x = f32(rng, *shape)

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)
    infer(mge.tensor(x))
    cg = compile_graph(infer.graph)
    assert cg.pipeline == "cpu-rules" and set(cg.rules) == kinds
    check(cg(x)[0], net(mge.tensor(x)).numpy())


def test_compiled_outputs_are_aligned_and_feed_back_without_staging(rng):
    """Outputs come back 64-byte aligned (fed back as the next call's inputs, a training
    step's parameters pass zero-copy), and a held output keeps its values through later
    calls (the VM's outputs are taken without a copy)."""
    x = f32(rng, 3, 37)
    b = G()
    cg = b.compile(b.op("add", b.input(x), b.const(np.float32(1))))
    first = cg(x)[0]                        # x itself may be unaligned: staged
    cg._per_thread.staging.clear()
    second = cg(first)[0]
    third = cg(second)[0]
    assert first.ctypes.data % 64 == 0 and second.ctypes.data % 64 == 0
    np.testing.assert_array_equal(first, x + 1)
    np.testing.assert_array_equal(second, (x + 1) + np.float32(1))
    np.testing.assert_array_equal(third, (x + 1) + np.float32(2))
    assert not cg._per_thread.staging       # the aligned output went in as it was


def test_an_output_that_is_a_staged_input_is_copied(rng):
    """An output that passes an input through may be the input's staging buffer, which
    the next call overwrites: it comes back as a copy."""
    x = f32(rng, 3, 37)
    b = G()
    inp = b.input(x)
    cg = b.compile(b.op("add", inp, b.const(np.float32(1))), inp)
    unaligned = np.empty(x.size + 1, np.float32)[1:].reshape(x.shape)
    unaligned[...] = x
    first = cg(unaligned)[1]
    unaligned[...] = x * 2
    cg(unaligned)
    np.testing.assert_array_equal(first, x)
