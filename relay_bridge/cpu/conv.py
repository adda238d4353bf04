"""conv2d (groups=1) on NCHW16c with OIHW{icb}i16o weights: the 14x16 register-tile rule.

Per reduction step the kernel loads one zmm of weights (16 output channels) and does
`reg` broadcast-FMAs into `reg` zmm accumulators (one per output column), which keeps
the FMA units busy (cpu-schedules.md measured 95-98 % of peak on ResNet 3x3 layers).
Padding, packing a plain NCHW input and widening the row to a multiple of `reg` all
happen in one "pad" stage inside the kernel; the epilogue runs on the register tile.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .._tvm import tvm
from .epilogue import Epilogue, blocked_output
from .layout import BLOCK, blocks, ceil_div, input_block
from .primfunc import inner_loops, parallel_if, scheduled_func, vector_lanes, vectorize_inner
from . import weight_prefetch


@dataclass(frozen=True)
class ConvShape:
    """A conv2d's geometry: input (n, c, h, w) NCHW, `oc` filters of kh x kw."""

    n: int
    c: int
    h: int
    w: int
    oc: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    blocked_input: bool = True
    # the conv's kh x kw taps are taps[offset:] of a packed weight of `taps` taps (one
    # output position's taps of a weight packed once: dead_taps.split_positions)
    taps: tuple[int, int] | None = None
    tap_offset: tuple[int, int] = (0, 0)

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.padding[0] - self.kh) // self.stride[0] + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.padding[1] - self.kw) // self.stride[1] + 1

    @property
    def icb(self) -> int:
        return input_block(self.c, self.blocked_input)

    @property
    def in_shape(self) -> tuple[int, ...]:
        if self.blocked_input:
            return (self.n, blocks(self.c), self.h, self.w, BLOCK)
        return (self.n, self.c, self.h, self.w)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.n, blocks(self.oc), self.oh, self.ow, BLOCK)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        kh, kw = self.taps or (self.kh, self.kw)
        return (blocks(self.oc), ceil_div(self.c, self.icb), kh, kw, self.icb, BLOCK)

    @property
    def flops(self) -> int:
        return 2 * self.n * self.oc * self.c * self.kh * self.kw * self.oh * self.ow


# (lo, hi, prefer) output columns per tile: 14 x 16 lanes is 28 of the 32 zmm registers;
# with AVX2 each column takes two ymm of the 16, so 6 columns (12 accumulators) is the
# most that does not spill (64->64 @56 measured 8.2 ms with 6 vs 16.9 ms with 14).
_TILE_RANGE = {16: (8, 16, 14), 8: (4, 6, 6)}


# A narrow-channel plain input (an RGB stem: 3 channels, one reduction block of 3): the
# reduction is only kh*kw*3 steps deep, and with 14 columns x 1 channel block each step
# spends 15 loads on 14 FMAs. 7 columns x 2 channel blocks (14 accumulators sharing each
# broadcast) with the 3-channel loop unrolled ran ResNet-18's 7x7/2 stem at 152 vs
# 85 GFLOP/s (bench: Xeon AVX-512, 1 thread, process CPU time).
_NARROW_INPUT_RANGE = {16: (4, 7, 7), 8: (4, 6, 6)}


# With AVX-512 and an even number of output-channel blocks: up to 8 columns x 2 channel
# blocks (16 accumulators; 2 weight loads + 8 broadcasts per 16 FMAs instead of 1 + 14
# per 14). Measured on the Xeon host (1 thread, warm, alternating builds) against
# 14 x 1: MobileNetV2's 1x1 convs at 14x14-56x56 12-17% faster (150 -> 175 GFLOP/s),
# ResNet-18's 3x3/2 convs 0.94 -> 0.81 ms (256->512 @14) and 0.83 -> 0.76 ms (128->256).
_PAIRED_RANGE = (4, 8, 7)


def tile_range(shape: "ConvShape", lanes: int) -> tuple[int, int, int]:
    """(lo, hi, prefer) output columns per register tile for this conv."""
    ocb = blocks(shape.oc)
    weight = 4 * ocb * BLOCK * shape.c * shape.kh * shape.kw
    if lanes == 16 and ocb % 2 == 0 and not (ocb == 2 and weight > L2_BYTES):
        return _PAIRED_RANGE            # (tile_order halves a 2-block tile past L2)
    if shape.icb < BLOCK and not shape.blocked_input:
        return _NARROW_INPUT_RANGE[lanes]
    return _TILE_RANGE[lanes]


def tile_width(ow: int, lo: int = 8, hi: int = 16, prefer: int = 14) -> int:
    """Output columns per register tile: the width in [lo, hi] that wastes the fewest
    padded columns (ties: `prefer`, then wider); a row of at most `hi` is one tile."""
    if ow <= hi:
        return ow
    return min(range(lo, hi + 1), key=lambda r: (ceil_div(ow, r) * r - ow, r != prefer, -r))


# Accumulators a register tile should hold: with reg columns x 1 channel block, a narrow
# row (7 columns on MobileNet's late 7x7 layers) leaves FMA latency uncovered and spends
# one broadcast load per FMA; 2 channel blocks x up to 8 columns share each broadcast.
TILE_ACCUMULATORS = 16


def channel_blocks(reg: int, oc_blocks: int, lanes: int) -> int:
    """Output-channel blocks per register tile: 4 for 3-column rows (a training step's
    3x3 weight gradients: 12 accumulators, 108 vs 95 GFLOP/s with 2; 1- and 2-column rows
    measured no gain or a loss), 2 when a row is at most half the tile (AVX-512 only: with
    AVX2 each column already takes two registers), when they divide."""
    if lanes != 16:
        return 1
    if reg == 3 and oc_blocks % 4 == 0:
        return 4
    if 2 * reg <= TILE_ACCUMULATORS and oc_blocks % 2 == 0:
        return 2
    return 1


# Short rows (2x2 and 1x1 maps: ResNet's last stages on small images; a training step's
# 3-column weight gradients) give a one-row tile of `reg` columns too few accumulators to
# cover the FMA latency, and the tile reads its weight slice once per output row. Such a
# tile stacks output rows, then images, up to STACKED_ACCUMULATORS zmm accumulators (of
# 32; 32 spilled: 256->256 @4 2.2 -> 6.7 ms). Zen 5, 1 thread, CPU time, the kernel alone
# (min of 7): 256->256 3x3 @2x2 b32 1.07 -> 0.54 ms, 512->512 @2x2 4.46 -> 2.28 ms,
# 512->512 1x1 @1x1 0.223 -> 0.065 ms, 3x3/2 256->512 @4 2.18 -> 1.14 ms, weight
# gradients (3x3 outputs) of 64 channels @16 4.12 -> 2.44 ms, 128 @8 3.14 -> 2.27 ms.
STACK_MAX_COLUMNS = 4
STACKED_ACCUMULATORS = 18


def stacks(reg: int, lanes: int) -> bool:
    """Whether a row of `reg` columns takes a stacked tile (AVX-512 only)."""
    return lanes == 16 and reg <= STACK_MAX_COLUMNS


def stacked_tile(shape: ConvShape, reg: int, kb: int) -> tuple[int, int]:
    """(output rows, images) of a stacked register tile of `kb` channel blocks: the most
    rows, then images, dividing the output's, within STACKED_ACCUMULATORS."""
    def most(extent: int, per: int) -> int:
        return max(d for d in range(1, extent + 1)
                   if extent % d == 0 and per * d <= STACKED_ACCUMULATORS)
    rows = most(shape.oh, reg * kb)
    return rows, most(shape.n, reg * kb * rows)


def padded_columns(shape: ConvShape, lanes: int) -> int:
    """Output positions the conv's register tiles compute (rows x tile-widened columns)."""
    reg = tile_width(shape.ow, *tile_range(shape, lanes))
    return shape.oh * ceil_div(shape.ow, reg) * reg


def flattened(shape: ConvShape, lanes: int) -> ConvShape | None:
    """A 1x1, stride-1, unpadded conv as one row of h*w pixels (its input and output
    reshaped: NCHW16c and NCHW keep a map's pixels contiguous, so both are views), when
    that row pads fewer tile columns than the map's rows do; else None. With AVX2's 4-6
    column tiles a 7-wide row takes 8 columns (MobileNetV2's 7x7 layers: 14% more FMAs
    than the conv has), the 49-pixel row 50; 14-wide rows take 15, 196 pixels 196."""
    if (shape.kh, shape.kw, shape.stride, shape.padding) != (1, 1, (1, 1), (0, 0)) \
            or shape.taps is not None or shape.h == 1:
        return None
    flat = replace(shape, h=1, w=shape.h * shape.w)
    return flat if padded_columns(flat, lanes) < padded_columns(shape, lanes) else None


def padded_input(x, shape: ConvShape, rows: int, cols: int, icb: int, nchw: bool):
    """Zero-padded (and, from NCHW, packed) input of `rows` x `cols` pixels per block, or
    None when the kernel can read `x` as it is."""
    te, t = tvm().te, tvm().tirx
    (ph, pw), c = shape.padding, shape.c
    if not nchw and not ph and not pw and rows <= shape.h and cols <= shape.w:
        return None
    zero = t.const(0.0, x.dtype)

    def f(n, cb, y, z, ci):
        conds = [y >= ph, y < shape.h + ph, z >= pw, z < shape.w + pw]
        if nchw:
            ch = cb * icb + ci
            if c % icb:
                conds.append(ch < c)
            value = x[n, ch, y - ph, z - pw]
        else:
            value = x[n, cb, y - ph, z - pw, ci]
        return te.if_then_else(t.all(*conds), value, zero)
    cblocks = ceil_div(c, icb) if nchw else blocks(c)
    return te.compute((shape.n, cblocks, rows, cols, icb), f, name="pad")


def conv2d_nchwc(shape: ConvShape, epilogue: Epilogue | None = None):
    """Scheduled PrimFunc (x, packed weight, *epilogue vectors, *epilogue tensors, out)."""
    te = tvm().te
    epilogue = epilogue or Epilogue()
    (sh, sw), reg = shape.stride, tile_width(shape.ow, *tile_range(shape, vector_lanes()))
    owp = ceil_div(shape.ow, reg) * reg
    rows, cols = (shape.oh - 1) * sh + shape.kh, (owp - 1) * sw + shape.kw
    icb, nchw = shape.icb, not shape.blocked_input
    x = te.placeholder(shape.in_shape, "float32", name="x")
    wt = te.placeholder(shape.weight_shape, "float32", name="w")
    vectors, tensors = epilogue.placeholders((blocks(shape.oc), BLOCK), shape.out_shape)
    xp = padded_input(x, shape, rows, cols, icb if nchw else BLOCK, nchw)
    src = x if xp is None else xp
    ico = te.reduce_axis((0, shape.weight_shape[1]), "ico")
    rh, rw = te.reduce_axis((0, shape.kh), "rh"), te.reduce_axis((0, shape.kw), "rw")
    ici = te.reduce_axis((0, icb), "ici")
    # a blocked input's reduction block of icb < 16 channels is part of a 16-block
    per = BLOCK // icb if shape.blocked_input else 1
    th, tw = shape.tap_offset
    full = te.compute(
        (shape.n, blocks(shape.oc), shape.oh, owp, BLOCK),
        lambda n, ko, y, z, ki: te.sum(src[n, ico // per, y * sh + rh, z * sw + rw,
                                           (ico % per) * icb + ici]
                                       * wt[ko, ico, rh + th, rw + tw, ici, ki],
                                       axis=[ico, rh, rw, ici]), name="conv")
    out = blocked_output(full, shape.out_shape, shape.oc, epilogue, vectors, tensors)

    lanes, kb = vector_lanes(), 2 if blocks(shape.oc) % 2 == 0 else 1
    stacked = stacks(reg, lanes) and stacked_tile(shape, reg, kb) != (1, 1)
    kb, ko_outer = tile_order(shape, reg, rows * cols, lanes, kb if stacked else None)
    tile_rows, images = stacked_tile(shape, reg, kb) if stacked else (1, 1)

    def schedule(sch):
        if xp is not None:
            n, cb, y, z, ci = sch.get_loops(sch.get_sblock("pad"))
            parallel_if(sch, sch.fuse(n, cb, y), shape.flops // 2)
            if icb == BLOCK or not nchw:
                sch.vectorize(ci)
        _schedule_tile(sch, "conv", reg, shape.flops // 2, kb, ko_outer, shape.blocked_input,
                       tile_rows, images)

    func = scheduled_func([x, wt, *vectors, *tensors, out], schedule, "conv2d_nchw16c",
                          shape.flops)
    if weight_prefetch.worth_it(shape.weight_shape, kb, ko_outer):
        func = weight_prefetch.prefetch_next_tile(
            func, shape.weight_shape, kb, (shape.n // images) * (shape.oh // tile_rows),
            weight_prefetch.fused_loop_name(kb, images > 1, tile_rows > 1))
    return func


# A core's share of L2: weights above it cannot stay cached across output rows.
L2_BYTES = 1 << 20
# 1x1 convs on maps up to 14x14 read their (L2-resident) weight once per output row with
# rows outer; channels outer reads it once and, with 2 threads, gives each core half of
# it. MobileNetV2 b1 in the model, 2 threads, per-kernel minima of 60 runs (old / new,
# alternating): 160->960 @7 0.283/0.284 -> 0.223-0.231 ms, 96->576 @14 0.258/0.264 ->
# 0.230-0.244, 960->160 @7 0.176/0.178 -> 0.160; 1 thread unchanged within noise. With
# only 4 output blocks (384->64 @14: 2 tiles of 2 blocks, each core reads the whole
# input) it lost 25% (0.12 -> 0.15 ms), hence the channel-block minimum.
SMALL_MAP = 14 * 14
SMALL_MAP_OC_BLOCKS = 8


def channels_outer(shape: ConvShape, pixels: int) -> bool:
    """Whether the tile loop should run output-channel blocks outermost, (ko, n, y) rather
    than (n, y, ko): with (n, y, ko) the whole packed weight is read once per output row,
    with (ko, n, y) the (padded) input once per channel block. Small maps with wide
    weights (ResNet's 512-channel layers at 1x1-2x2, a training step's weight gradients)
    read ~10x less memory channels-outer; large maps keep rows outer. A weight that fits
    L2 keeps rows outer too, except for 1x1 convs with at least SMALL_MAP_OC_BLOCKS output
    channel blocks on maps of at most SMALL_MAP pixels (MobileNet's 7x7 and 14x14
    layers), where the traffic comparison decides."""
    weight = 4 * blocks(shape.oc) * BLOCK * shape.c * shape.kh * shape.kw
    pointwise_small = shape.kh == shape.kw == 1 and shape.oh * shape.ow <= SMALL_MAP \
        and blocks(shape.oc) >= SMALL_MAP_OC_BLOCKS
    if weight <= L2_BYTES and not pointwise_small:
        return False
    data = 4 * shape.n * blocks(shape.c) * BLOCK * pixels
    return weight * shape.n * shape.oh > data * blocks(shape.oc)


def tile_order(shape: ConvShape, reg: int, pixels: int, lanes: int, kb: int | None = None
               ) -> tuple[int, bool]:
    """(channel blocks per tile, channels outermost) for a tile `reg` columns wide (of
    `kb` channel blocks: a stacked tile's; default channel_blocks')."""
    outer = channels_outer(shape, pixels)
    kb = channel_blocks(reg, blocks(shape.oc), lanes) if kb is None else kb
    if outer and kb > 1 and blocks(shape.oc) == kb:
        # one tile holds every channel block, so running channel blocks outermost
        # changes nothing and the whole weight streams past each output row: with half
        # of it per tile the halves take turns staying in L2 (a training step's
        # 64-channel weight gradient on a 16x16 map: 7.7 -> 5.2 ms)
        kb //= 2
    return kb, outer


def _schedule_tile(sch: Any, block: str, reg: int, macs: int, kb: int = 1,
                   ko_outer: bool = False, blocked_input: bool = False, rows: int = 1,
                   images: int = 1) -> None:
    """The (kb x 16 channels) x images x rows x reg columns accumulator tile, parallel
    over (n, y, ko/kb) (or (ko/kb, n, y): `channels_outer`), n and y in steps of
    `images` and `rows` (stacked_tile)."""
    b = sch.get_sblock(block)
    n, ko, y, z, ki, ico, rh, rw, ici = sch.get_loops(b)
    zo, zi = sch.split(z, [None, reg])
    stacked = []                                  # the tile's image and row loops
    if images > 1:
        n, ni = sch.split(n, [None, images])
        stacked.append(ni)
    if rows > 1:
        y, yi = sch.split(y, [None, rows])
        stacked.append(yi)
    if kb > 1:
        ko, koi = sch.split(ko, [None, kb])
        inner = [zo, ico, rh, rw, ici, koi, *stacked, zi, ki]
    else:
        inner = [zo, ico, rh, rw, ici, *stacked, zi, ki]
    outer = [ko, n, y] if ko_outer else [n, y, ko]
    sch.reorder(*outer, *inner)
    par = sch.fuse(*outer)
    parallel_if(sch, par, macs)
    # the accumulator tile, "global" not "local": at most 896 bytes (reg x kb x 16 floats),
    # so a stack array rather than a TVMBackendAllocWorkspace call per tile (depthwise.py).
    # ResNet-18 b1, 1 thread, CPU time: the 7x7 stem 6.8%, the 1x1 downsamples 4-8% faster
    sch.set_scope(b, 0, "global")
    out = sch.get_sblock("out")
    sch.reverse_compute_at(out, zo)
    sch.vectorize(ki)
    sch.unroll(zi)
    if kb > 1:
        sch.unroll(koi)
    for lp in stacked:
        sch.unroll(lp)
    sch.unroll(rw)
    if int(sch.get(ici).extent) < BLOCK and not blocked_input:
        sch.unroll(ici)                                # a 3-channel (RGB) reduction block
    init = sch.decompose_reduction(b, ico)             # after vectorize/unroll (see notes)
    loops = inner_loops(sch, init, par)
    if loops:
        sch.vectorize(loops[-1])
    tile_loops = 1 + (kb > 1) + len(stacked)
    for lp in loops[-1 - tile_loops:-1] if len(loops) > tile_loops else loops[:-1]:
        sch.unroll(lp)                                 # zi (koi, ni, yi), not zo
    vectorize_inner(sch, out, zo)

