"""conv2d (groups 1) on NCHW16c as AMX tile products, without an im2col buffer.

A kh x kw conv is a GEMM over k = (tap, input channel): out[pixel, oc] = sum over taps
(r, c) and channels of x[pixel's input + (r, c), ch] * w[oc, ch, r, c]. The kernel first
writes the input, zero-padded, as bfloat16 hi/lo tiles (amx.py's split), each image
cut into stride x stride phases (pixels (s*Y + i, s*X + j) in phase (i, j); one phase
at stride 1), each phase a flat row-major run of width Wv = padded width / stride.
Output pixel (y, z) is computed at virtual index v = y * Wv + z: its tap (r, c) input
is pixel v + (r // s) * Wv + c // s of phase (r % s, c % s), so the 16 output pixels of
an A tile are 16 consecutive pixels of one phase and one TILELOADD reads them for any
tap. The Wv - ow virtual columns of a row are computed and dropped (7x7 maps: 63 of 64
rows used for 49 pixels; 56x56: 3%). The weight is packed once at build time as
amx.py's dense weight of the (kh * kw * C, OC) matrix. amx.py's `accumulate` runs the
tile products into a float32 (N, OC/16, rows, 16) buffer; the epilogue then crops it
into the NCHW16c output.

Why: at batch 1 ResNet-18's 512-channel 3x3 layers (7x7 maps) ran at ~54 GMAC/s with
the FMA rule (conv.py) and its 256-channel ones with Winograd were bound by their 4x
larger transformed weight; three bf16 products per tile do 16 x 16 x 32 multiply-adds
each where an FMA does 16. Error: amx.py's, a few 1e-6 of the largest output.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._tvm import tvm
from .amx import (GROUP_BYTES, TASK_N, TILE_K, TILE_M, AmxTiles, EmulatedTiles, TileOperands,
                  TileRef, accumulate, k_block, pack_weight, split_value, task_loop)
from .conv import ConvShape
from .epilogue import Epilogue, blocked_output
from .layout import BLOCK, blocks, ceil_div
from .primfunc import parallel_if, scheduled_func

MIN_TASKS = 8       # tasks a kernel should have for the threads to share (when rows allow)


@dataclass(frozen=True)
class AmxConvShape:
    """A conv's flat layout: Wp x Hp padded input per image, Wv virtual output columns."""

    conv: ConvShape

    @property
    def stride(self) -> int:
        return self.conv.stride[0]

    @property
    def wp(self) -> int:
        """Padded input width, rounded up to the stride."""
        return ceil_div(self.conv.w + 2 * self.conv.padding[1], self.stride) * self.stride

    @property
    def wv(self) -> int:
        """Width of a phase (virtual output columns per row)."""
        return self.wp // self.stride

    @property
    def hv(self) -> int:
        """Height of a phase."""
        return ceil_div(self.conv.h + 2 * self.conv.padding[0], self.stride)

    @property
    def phases(self) -> int:
        return self.stride * self.stride

    @property
    def rows(self) -> int:
        """Output rows (virtual pixels) per image, whole 16-row tiles."""
        return ceil_div(self.conv.oh * self.wv, TILE_M) * TILE_M

    def shift(self, r: int, c: int) -> int:
        """Flat offset in its phase of tap (r, c)'s input for virtual pixel 0."""
        return r // self.stride * self.wv + c // self.stride

    @property
    def pixels(self) -> int:
        """Flat pixels per phase: the padded map, and what the last tile's taps read."""
        c = self.conv
        return max(self.hv * self.wv, self.rows + self.shift(c.kh - 1, c.kw - 1))

    @property
    def steps(self) -> int:
        """k steps of 32 channels: taps x channel tiles."""
        return self.conv.kh * self.conv.kw * (self.conv.c // TILE_K)

    @property
    def tiles_shape(self) -> tuple[int, ...]:
        return (self.conv.n, self.conv.c // TILE_K, 2, self.phases, self.pixels, 2, BLOCK)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.conv.oc // 16, self.steps, 2, 16, 32)

    @property
    def group_blocks(self) -> int:
        """Row blocks of an image a group of tasks shares (the last group may have fewer):
        few enough that their input span (what their taps read) fits GROUP_BYTES and that
        the kernel has MIN_TASKS tasks (images x groups x 32-channel columns) where the
        rows allow; no more groups than that, as each group reads its columns' weights
        again."""
        c, blocks_ = self.conv, self.rows // TILE_M
        span = 4 * c.c * self.phases * (self.rows + self.shift(c.kh - 1, c.kw - 1))
        groups = max(ceil_div(span, GROUP_BYTES), ceil_div(MIN_TASKS, c.n * (c.oc // TASK_N)))
        return ceil_div(blocks_, min(blocks_, groups))

    @property
    def groups(self) -> int:
        return ceil_div(self.rows // TILE_M, self.group_blocks)


def applies(conv: ConvShape) -> bool:
    """Square strides, whole 32-channel tiles each way, an NCHW16c input (dilation 1 and
    groups 1 are plan.py's)."""
    return conv.blocked_input and conv.stride[0] == conv.stride[1] \
        and conv.c % TILE_K == 0 and conv.oc % TASK_N == 0


def pack_conv_weight(w: np.ndarray) -> np.ndarray:
    """(OC, C, kh, kw) -> amx.pack_weight of the (kh * kw * C, OC) matrix, k = tap * C + c."""
    oc, c, kh, kw = w.shape
    return pack_weight(np.asarray(w, np.float32).transpose(2, 3, 1, 0).reshape(kh * kw * c, oc),
                       transpose_b=False)


def conv2d_amx(conv: ConvShape, epilogue: Epilogue | None = None, emulate: bool = False):
    """Scheduled PrimFunc (x NCHW16c, packed weight, tile config (64,) uint8, *epilogue
    vectors (OC/16, 16), *epilogue tensors, out NCHW16c); `emulate`: amx.EmulatedTiles
    (tests on hosts without AMX)."""
    te, t = tvm().te, tvm().tirx
    tiles = EmulatedTiles() if emulate else AmxTiles()
    epilogue = epilogue or Epilogue()
    shape = AmxConvShape(conv)
    s, wv, rows = shape.stride, shape.wv, shape.rows
    ph, pw = conv.padding
    ctiles, ocb = conv.c // TILE_K, conv.oc // BLOCK
    x = te.placeholder(conv.in_shape, "float32", name="x")
    w = te.placeholder(shape.weight_shape, "uint16", name="w")
    cfg = te.placeholder((64,), "uint8", name="cfg")
    vectors, tensors = epilogue.placeholders((blocks(conv.oc), BLOCK), conv.out_shape)

    def tile_value(n, q, p, phase, px, half, ci):
        y = px // wv * s + phase // s - ph
        z = px % wv * s + phase % s - pw
        inside = t.all(y >= 0, y < conv.h, z >= 0, z < conv.w)
        value = te.if_then_else(inside, x[n, q * 2 + half, y, z, ci], t.const(0.0, "float32"))
        return split_value(t, value, p)
    x_tiles = te.compute(shape.tiles_shape, tile_value, name="x_tiles")

    per, groups, cols = shape.group_blocks, shape.groups, conv.oc // TASK_N
    taps_w = conv.kw

    def body(ins, outs):
        xt, wt, config = ins
        c = outs[0]
        task = t.Var("task", "int32")
        n, rest = t.floordiv(task, groups * cols), t.floormod(task, groups * cols)
        g, col = t.floordiv(rest, cols), t.floormod(rest, cols)
        zero = t.const(0, "int32")

        def a_tile(r, q, p):
            tap, ct = t.floordiv(q, ctiles), t.floormod(q, ctiles)
            ty, tx = t.floordiv(tap, taps_w), t.floormod(tap, taps_w)
            phase = t.floormod(ty, s) * s + t.floormod(tx, s)
            px = (g * per + r) * TILE_M + t.floordiv(ty, s) * wv + t.floordiv(tx, s)
            return TileRef(xt, (n, ct, p, phase, px, zero, zero), 32)
        ops = TileOperands(
            a=a_tile,
            b=lambda h, q, p: TileRef(wt, (col * 2 + h, q, p, zero, zero), 32),
            c=lambda r, h: TileRef(c, (n, col * 2 + h, (g * per + r) * TILE_M, zero), BLOCK))
        row_blocks = t.min(per, rows // TILE_M - g * per)      # the last group's are fewer
        return task_loop(task, conv.n * groups * cols, conv.flops // 2,
                         accumulate(tiles, ops, row_blocks, shape.steps,
                                    TileRef(config, (zero,), 0),
                                    k_block(shape.steps, divisor=True)), not emulate)

    acc = te.extern((conv.n, ocb, rows, BLOCK), [x_tiles, w, cfg], body, name="amx_conv",
                    dtype="float32")
    full = te.compute(conv.out_shape, lambda n, k, y, z, ko: acc[n, k, y * wv + z, ko],
                      name="full")
    out = blocked_output(full, conv.out_shape, conv.oc, epilogue, vectors, tensors)

    def schedule(sch):
        work = conv.flops // 2
        n, q, p, phase, px, half, ci = sch.get_loops(sch.get_sblock("x_tiles"))
        parallel_if(sch, sch.fuse(n, q, p, phase, px), work)
        sch.vectorize(ci)
        sch.compute_inline(sch.get_sblock("full"))
        n, k, y, z, ko = sch.get_loops(sch.get_sblock("out"))
        parallel_if(sch, sch.fuse(n, k, y), work)
        sch.vectorize(ko)

    return scheduled_func([x, w, cfg, *vectors, *tensors, out], schedule, "conv_amx",
                          conv.flops)



ENV = "MEGTRACE_AMX_CONV"


def mode() -> str:
    """"off" unless MEGTRACE_AMX_CONV asks: "all" (1, on, all) takes every conv the rule
    covers, "direct" only those the Winograd rule would not take. The rule's addressing
    is checked (tests, amx.EmulatedTiles) but its speed was never measured on an AMX
    host, so the FMA and Winograd rules stay the default until it is."""
    value = os.environ.get(ENV, "0").strip().lower()
    if value == "direct":
        return "direct"
    return "all" if value in ("1", "true", "on", "yes", "all") else "off"
