"""Prefetch of the next channel tile's weights in a channels-outermost conv.

At batch 1 a 1x1 conv on MobileNetV2's 7x7 maps reads its weight once per call, and
between calls the rest of the network has pushed it out to L3 or memory. With channels
outermost (conv.channels_outer) each channel tile's weight slice is read by the tile's
oh output rows in turn; each row also asks for 1/oh of the next tile's slice, so that
it is in cache when that tile starts. Measured alone with caches evicted before each
call (1 thread, Zen 4 host, min of 15): 160->960 @7 0.208 -> 0.191 ms, 320->1280 @7
0.466 -> 0.446 ms; with a slice of 74 KB (576->160) or 123 KB (960->320) the prefetches
evicted what the current tile still reads (0.129 -> 0.131, 0.341 -> 0.379 ms), hence
MAX_SLICE_BYTES. In the model (MobileNetV2 b1, 1 thread, per-kernel minima of 40 runs,
6 alternating rounds at load 17-28, medians): 160->960 @7 (x3) 0.538 -> 0.505 ms,
96->576 @14 (x3) 0.653 -> 0.638, 64->384 @14 (x4) 0.402 -> 0.395, 320->1280 @7 no
change (0.43); sum of all kernels 6.87 -> 6.77 ms.
"""
from __future__ import annotations

import math
from typing import Any

from .._tvm import tvm
from .layout import ceil_div
from .primfunc import prepend_in_loop, read_sources, unravel

MAX_SLICE_BYTES = 48 << 10
LINE_FLOATS = 16                      # one 64-byte cache line


def slice_bytes(weight_shape: tuple[int, ...], kb: int) -> int:
    """Bytes of one channel tile's (kb output blocks') packed weight."""
    return 4 * kb * math.prod(weight_shape[1:])


def worth_it(weight_shape: tuple[int, ...], kb: int, ko_outer: bool) -> bool:
    """Channels outermost, more than one channel tile, and a slice small enough that
    it and the next one stay in L1/L2 together."""
    return ko_outer and weight_shape[0] > kb and slice_bytes(weight_shape, kb) <= MAX_SLICE_BYTES


def prefetch_next_tile(func: Any, weight_shape: tuple[int, ...], kb: int, rows: int,
                       loop: str) -> Any:
    """`func` with, at the start of each iteration of the fused (channel tile, image,
    row) loop `loop`, prefetches (into L2, prefetcht1) of the iteration's share of the next
    tile's weight lines; `rows` iterations (images x output rows) share one tile."""
    t = tvm().tirx
    w = read_sources(func)["w"]
    per_block = math.prod(weight_shape[1:])       # floats of one output block's weight
    lines = kb * per_block // LINE_FLOATS
    per = ceil_div(lines, rows)
    tiles = weight_shape[0] // kb
    inner = weight_shape[1:]

    def make(env):
        it = env[loop]
        nxt = t.min(t.floordiv(it, rows) + 1, tiles - 1)
        p = t.Var("p", "int32")
        line = t.min(t.floormod(it, rows) * per + p, lines - 1)
        element = line * LINE_FLOATS
        block = nxt * kb + t.floordiv(element, per_block)
        at = t.address_of(t.BufferLoad(w, [block, *unravel(t.floormod(element, per_block),
                                                            inner)]))
        call = t.call_llvm_intrin("void", "llvm.prefetch", at, t.const(0, "int32"),
                                  t.const(2, "int32"), t.const(1, "int32"))
        return t.For(p, t.const(0, "int32"), t.const(per, "int32"), t.ForKind.SERIAL,
                     t.Evaluate(call))
    return prepend_in_loop(func, loop, make)


def fused_loop_name(kb: int, images: bool = False, rows: bool = False) -> str:
    """The name s_tir gives the fused (ko[/kb], n[/images], y[/rows]) loop of
    conv._schedule_tile (`images`, `rows`: whether the tile stacks them)."""
    return "_".join(("ko_0" if kb > 1 else "ko", "n_0" if images else "n",
                     "y_0" if rows else "y", "fused"))


