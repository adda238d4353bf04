"""An expanding 1x1 conv and the 3x3 depthwise conv it feeds, as one kernel (MobileNet).

In an inverted-residual block the 1x1 conv writes a 6x wider activation that the
depthwise conv reads right back: at 112x112 that is 4.8 MB each way, so both kernels
wait on memory (in a model run the pair took 2-3x its warm time). Here, per channel
block and strip of R output rows, the 1x1 conv computes the (R-1)*s + 3 expanded rows
the strip needs into a buffer that stays in cache (register tiles of `reg1` columns x 16
channels, its epilogue applied on the way), and the depthwise conv reads them from
there; the expanded tensor never exists. The 1x1 conv computes the input's own
columns (reads at clamped rows, without guards: a guard per tap cost 2x on 14x14
layers; the epilogue stage writes zeros in the padding rows) and the depthwise conv
guards its taps on the padding columns: computed padding columns cost 1x1 work, and
their clamped reads gave each column of the 1x1 tile an address of its own (MobileNetV2's
pairs alone, warm, Zen 5, 1 thread: 112 s2 0.239 -> 0.227 ms, 56 s1 0.146 -> 0.143,
56 s2 0.121 -> 0.116). Neighbouring strips recompute their halo rows ((3 - s) / (R*s)
more 1x1 work). Measured alone with caches flushed between calls (1 thread, CPU time;
a guarded first version): 16->96 @112 stride 2 0.65 ms vs 1.21 ms for the two
kernels, 24->144 @56 0.54 vs 0.61 ms.

The expanded rows are indexed (strip, row in strip), so that each strip's buffer is
its own (a rolling buffer over overlapping rows would make the rows' block iterator
opaque, and the register tile could not be reordered).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .._tvm import tvm
from .epilogue import Epilogue, blocked_output
from .layout import BLOCK, blocks, ceil_div, reduce_block
from .primfunc import parallel_if, scheduled_func, vector_lanes, vectorize_inner

ENV = "MEGTRACE_EXPAND_DEPTHWISE"      # 0/off: always two kernels
# 1x1 register tile widths, preferred first, by vector lanes. With AVX2 (16 ymm) a
# column is two registers: 14 columns spilled. Zen 1, 1 thread, CPU time, the pair alone
# (14 -> 4 columns): 16->96 @112 s2 1.86 -> 1.17 ms, 24->144 @56 s1 1.18 -> 0.84, s2
# 0.96 -> 0.61, 32->192 @28 0.48 -> 0.33; 6, 3 or 2 columns 3-28% slower than 4.
REG1_CHOICES = {16: (14, 16, 12, 13, 15, 11, 10, 9, 8), 8: (4, 6, 5, 3, 2)}
STRIP_BYTES = 160 << 10                               # expanded rows per strip: L2-sized
# Below this size the expanded tensor stays in cache between the two kernels and
# fusing gains nothing: MobileNetV2 in a model run, 1 thread, CPU time, separate ->
# fused: 112x112 stride 2 0.73 -> 0.42-0.46 ms, 56x56 stride 1 0.45 -> 0.34-0.36 ms,
# stride 2 0.28 -> 0.29 ms; 28x28 0.24 -> 0.24 ms, 14x14 0.44 -> 0.45 ms, 7x7 (the
# tile wastes 2 of 9 columns) 0.56 -> 0.70 ms.
MIN_EXPANDED_BYTES = 1 << 20
# ... and one image's expanded tensor must be this large: at batch 8 (1 thread, CPU
# time, per-kernel minima) the 28x28 pairs (602 KB an image) gain fused (1.41-1.47 ->
# 1.01-1.22 ms), the 14x14 and 7x7 ones lose (96->576 @14 1.64-1.86 -> 1.92-2.07 ms,
# 160->960 @7 1.01-1.09 -> 1.46-1.50 ms): their 1x1 work on halo rows and padding
# columns (16x16 for 14x14, 9x9 for 7x7) costs more than the expanded tensor's trip
# through L3.
MIN_IMAGE_EXPANDED_BYTES = 512 << 10


@dataclass(frozen=True)
class PairShape:
    """x (n, c, h, w) -> 1x1 conv to e channels -> 3x3 depthwise, padding 1, stride s."""

    n: int
    c: int
    h: int
    w: int
    e: int
    stride: int

    @property
    def icb(self) -> int:
        """Input channels per reduction step (layout.reduce_block)."""
        return reduce_block(self.c)

    @property
    def oh(self) -> int:
        return (self.h - 1) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.w - 1) // self.stride + 1

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.n, blocks(self.e), self.oh, self.ow, BLOCK)

    @property
    def macs(self) -> int:
        return self.n * self.e * (self.c * self.h * self.w + 9 * self.oh * self.ow)


@dataclass(frozen=True)
class Tiling:
    rows: int        # R output rows per strip
    reg: int         # depthwise tile columns
    owp: int         # depthwise columns computed (>= ow, a multiple of reg)
    reg1: int        # 1x1 tile columns; divides the expanded row width
    w2: int          # expanded columns computed: the input's w, widened to a reg1 multiple


# depthwise tile widths, preferred first (depthwise.py); AVX2 has no room for 7 columns
DW_REG_CHOICES = {16: (4, 7, 3, 2), 8: (4, 3, 2)}


def strip_rows(rows: int, stride: int) -> int:
    """Expanded rows a strip of `rows` output rows reads: (rows - 1) * stride + 3."""
    return (rows - 1) * stride + 3


def tiling(shape: PairShape) -> Tiling | None:
    """Strip height and tile widths: the depthwise tile of 4 columns unless another
    wastes fewer (a 2-column tile ran the 56-wide layers at half the rate), the 1x1 tile
    width that covers the input row with the fewest extra columns (14 for MobileNet's
    112/56/28-wide rows with AVX-512, 4 with AVX2: none), then the tallest strip whose
    expanded rows fit STRIP_BYTES; None when nothing fits."""
    s, w = shape.stride, shape.w
    lanes = vector_lanes()
    dw_choices, choices = DW_REG_CHOICES[lanes], REG1_CHOICES[lanes]
    reg = min(dw_choices, key=lambda r: (ceil_div(shape.ow, r) * r - shape.ow,
                                         dw_choices.index(r)))
    owp = ceil_div(shape.ow, reg) * reg
    w2, reg1 = min(((ceil_div(w, r) * r, r) for r in choices),
                   key=lambda wr: (wr[0], choices.index(wr[1])))
    fits = [r for r in range(1, shape.oh + 1) if shape.oh % r == 0
            and strip_rows(r, s) * w2 * BLOCK * 4 <= STRIP_BYTES]
    return Tiling(max(fits), reg, owp, reg1, w2) if fits else None


def mode() -> str:
    """"on" (the default) or "off", from MEGTRACE_EXPAND_DEPTHWISE."""
    value = os.environ.get(ENV, "1").strip().lower()
    return "off" if value in ("0", "off", "false", "no") else "on"


def applies(shape: PairShape) -> bool:
    """Stride 1 or 2, a tiling exists, and the expanded tensor would leave the cache
    (and be large for each image: see MIN_IMAGE_EXPANDED_BYTES)."""
    if mode() == "off":
        return False
    image = blocks(shape.e) * BLOCK * shape.h * shape.w * 4
    return shape.stride in (1, 2) and image * shape.n >= MIN_EXPANDED_BYTES \
        and image >= MIN_IMAGE_EXPANDED_BYTES \
        and tiling(shape) is not None


def expand_depthwise(shape: PairShape, first: Epilogue | None = None,
                     second: Epilogue | None = None):
    """Scheduled PrimFunc (x blocked, 1x1 weight (E/16, C/icb, 1, 1, icb, 16), *first's
    vectors, depthwise weight (E/16, 3, 3, 16), *second's vectors, out blocked).
    Epilogues with tensor operands are not taken (lower.py checks)."""
    te, t = tvm().te, tvm().tirx
    first, second = first or Epilogue(), second or Epilogue()
    til = tiling(shape)
    if til is None:
        raise ValueError(f"expand_depthwise: no tiling for {shape}")
    s, (h, w) = shape.stride, (shape.h, shape.w)
    cb, eb = blocks(shape.c), blocks(shape.e)
    r_rows, w2 = strip_rows(til.rows, s), til.w2
    x = te.placeholder((shape.n, cb, h, w, BLOCK), "float32", name="x")
    icb = shape.icb
    steps, per = ceil_div(shape.c, icb), BLOCK // icb     # reduction blocks, per input block
    w1 = te.placeholder((eb, steps, 1, 1, icb, BLOCK), "float32", name="w1")
    v1, _ = first.placeholders((eb, BLOCK), ())
    wd = te.placeholder((eb, 3, 3, BLOCK), "float32", name="wd")
    v2, _ = second.placeholders((eb, BLOCK), ())
    v2 = [te.placeholder(v.shape, "float32", name=f"u{i}") for i, v in enumerate(v2)]
    ico, ici = te.reduce_axis((0, steps), "ico"), te.reduce_axis((0, icb), "ici")
    zero = t.const(0.0, "float32")

    def row(yo, r):                     # the padded input row of a strip's r-th row
        return yo * (til.rows * s) + r

    def x_at(b, y, z):     # rows clamped, unguarded: `mid` zeroes the padding rows
        col = z if w2 == w else t.min(z, w - 1)
        return x[b, ico // per, t.min(t.max(y - 1, 0), h - 1), col, (ico % per) * icb + ici]
    strips = (shape.n, eb, shape.oh // til.rows, r_rows, w2, BLOCK)
    raw = te.compute(strips, lambda b, k, yo, r, z, ki: te.sum(
        x_at(b, row(yo, r), z) * w1[k, ico, 0, 0, ici, ki], axis=[ico, ici]), name="raw")
    mid = te.compute(strips, lambda b, k, yo, r, z, ki: te.if_then_else(
        t.all(row(yo, r) >= 1, row(yo, r) <= h),
        first.apply(raw[b, k, yo, r, z, ki], lambda q: v1[q][k, ki], None), zero), name="mid")
    rh, rw = te.reduce_axis((0, 3), "rh"), te.reduce_axis((0, 3), "rw")

    def tap(b, k, y, z, ki):   # the padding columns are a guard, not computed columns
        col = z * s + rw - 1
        return te.if_then_else(t.all(col >= 0, col < w),
                               mid[b, k, y // til.rows, (y % til.rows) * s + rh, col, ki],
                               zero) * wd[k, rh, rw, ki]
    dw = te.compute((shape.n, eb, shape.oh, til.owp, BLOCK), lambda b, k, y, z, ki: te.sum(
        tap(b, k, y, z, ki), axis=[rh, rw]), name="dw")
    out = blocked_output(dw, shape.out_shape, shape.e, second, v2, [])

    def schedule(sch):
        d = sch.get_sblock("dw")
        b, k, y, z, ki, r0, r1 = sch.get_loops(d)
        yo, yi = sch.split(y, [None, til.rows])
        zo, zi = sch.split(z, [None, til.reg])
        sch.reorder(b, k, yo, yi, zo, r0, r1, zi, ki)
        par = sch.fuse(b, k, yo)
        parallel_if(sch, par, shape.macs)
        # "local" (a TVMBackendAllocWorkspace call per tile), unlike depthwise.py: on the
        # stack ("global") this kernel measured no faster, 0-3% slower (MobileNetV2 b1,
        # 1 thread, CPU time, min of 600, alternating builds), for either tile
        sch.set_scope(d, 0, "local")
        o = sch.get_sblock("out")
        sch.reverse_compute_at(o, zo)
        sch.vectorize(ki)
        sch.unroll(zi)
        sch.unroll(r1)
        sch.unroll(r0)
        init = sch.decompose_reduction(d, r0)
        vectorize_inner(sch, init, zo)
        vectorize_inner(sch, o, zo)
        m = sch.get_sblock("mid")
        sch.compute_at(m, par)
        mc, mk = sch.get_loops(m)[-2:]
        c_o, c_i = sch.split(mc, [None, til.reg1])
        rb = sch.get_sblock("raw")
        sch.compute_at(rb, c_o)
        loops = sch.get_loops(rb)
        many = steps > 1                               # a 1-step loop is not there
        col, kk, reds = loops[-4 if many else -3], loops[-3 if many else -2], \
            loops[-2:] if many else loops[-1:]
        sch.reorder(*reds, col, kk)
        sch.set_scope(rb, 0, "local")                  # the reg1 x 16 accumulator tile
        sch.vectorize(kk)
        sch.unroll(col)
        rinit = sch.decompose_reduction(rb, reds[0])
        il = sch.get_loops(rinit)[-2:]
        sch.vectorize(il[-1])
        sch.unroll(il[0])
        sch.vectorize(mk)
        sch.unroll(c_i)

    return scheduled_func([x, w1, *v1, wd, *v2, out], schedule,
                          "expand_depthwise_nchw16c", 2 * shape.macs)
