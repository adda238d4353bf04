"""Depthwise conv2d (groups == channels, one filter per channel) on NCHW16c, reg_n = 4.

Depthwise has no reuse across channels, so each FMA needs its own input load; a small
tile of 4 output columns x 16 channels keeps loads and FMAs balanced (cpu-schedules.md:
reg_n 4 beats 8, 14 and 28). The epilogue is as in conv.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from .._tvm import tvm
from .conv import ConvShape
from .epilogue import Epilogue, blocked_output
from .layout import BLOCK, blocks, ceil_div
from .primfunc import parallel_if, scheduled_func, vectorize_inner

REG_N = 4
UNROLLED_ROW_TILES = 4      # rows of at most this many tiles are unrolled whole


@dataclass(frozen=True)
class DepthwiseShape(ConvShape):
    """Depthwise geometry: `oc` must equal `c`."""

    @property
    def icb(self) -> int:
        return BLOCK

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (blocks(self.c), self.kh, self.kw, BLOCK)

    @property
    def flops(self) -> int:
        return 2 * self.n * self.c * self.kh * self.kw * self.oh * self.ow


def depthwise_nchwc(shape: DepthwiseShape, epilogue: Epilogue | None = None):
    """Scheduled PrimFunc (x blocked, packed weight, *epilogue vectors, *epilogue tensors,
    out blocked).

    The zero padding is a guard on each tap rather than a padded copy of the input: for
    depthwise a copy costs as much as the arithmetic (measured: 169 vs 119 GFLOP/s with
    a pad stage on 144 ch @56, 2 threads). The input must already be blocked: packing a
    lone NCHW depthwise loses to TVM's NCHW loop (cpu-schedules.md), so lower.py leaves
    those on the default path.
    """
    te, t = tvm().te, tvm().tirx
    if shape.oc != shape.c:
        raise ValueError(f"depthwise: {shape.oc} filters for {shape.c} channels")
    if not shape.blocked_input:
        raise ValueError("depthwise_nchwc: the input must be NCHW16c")
    epilogue = epilogue or Epilogue()
    (sh, sw), (ph, pw) = shape.stride, shape.padding
    reg = min(REG_N, shape.ow)
    owp = ceil_div(shape.ow, reg) * reg
    x = te.placeholder(shape.in_shape, "float32", name="x")
    wt = te.placeholder(shape.weight_shape, "float32", name="w")
    vectors, tensors = epilogue.placeholders((blocks(shape.c), BLOCK), shape.out_shape)
    rh, rw = te.reduce_axis((0, shape.kh), "rh"), te.reduce_axis((0, shape.kw), "rw")
    zero = t.const(0.0, "float32")

    def tap(n, c, y, z, ci):
        yy, zz = y * sh + rh - ph, z * sw + rw - pw
        inside = t.all(yy >= 0, yy < shape.h, zz >= 0, zz < shape.w)
        return te.if_then_else(inside, x[n, c, yy, zz, ci], zero) * wt[c, rh, rw, ci]

    full = te.compute((shape.n, blocks(shape.c), shape.oh, owp, BLOCK),
                      lambda n, c, y, z, ci: te.sum(tap(n, c, y, z, ci), axis=[rh, rw]),
                      name="dwconv")
    out = blocked_output(full, shape.out_shape, shape.c, epilogue, vectors, tensors)

    def schedule(sch):
        b = sch.get_sblock("dwconv")
        n, c, y, z, ci, r0, r1 = sch.get_loops(b)
        zo, zi = sch.split(z, [None, reg])
        sch.reorder(n, c, y, zo, r0, r1, zi, ci)
        par = sch.fuse(n, c, y)
        parallel_if(sch, par, shape.flops // 2)
        # the reg x 16 accumulator tile, "global" not "local": TVM puts a CPU kernel's
        # "global" buffers under 1 KB on the stack, its "local" ones on the heap
        # (TVMBackendAllocWorkspace per tile). Measured (MobileNetV2 b1, 1 thread, CPU
        # time, min over 5-6 rounds of 100-150 runs, alternating builds, load 2-19): its
        # depthwise kernels 17-54% faster, whole net 2-3% (tests/cpu_rules/test_stack_tiles)
        sch.set_scope(b, 0, "global")
        o = sch.get_sblock("out")
        sch.reverse_compute_at(o, zo)
        sch.vectorize(ci)
        sch.unroll(zi)
        sch.unroll(r1)
        sch.unroll(r0)
        init = sch.decompose_reduction(b, r0)
        # zo is the update's loop too: unrolling it unrolls the whole output row, which
        # short rows gain from (14 wide: 4 tiles, 12-17% faster) but long ones do not
        # (112 wide: 28 tiles, a 1 s build for nothing; issue 11, as in pool.py)
        vectorize_inner(sch, init, par if owp // reg <= UNROLLED_ROW_TILES else zo)
        vectorize_inner(sch, o, zo)

    return scheduled_func([x, wt, *vectors, *tensors, out], schedule, "depthwise_nchw16c",
                          shape.flops)
