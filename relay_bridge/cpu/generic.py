"""The generic rule: every PrimFunc the default pipeline leaves unscheduled gets threads
and vectors (TVM 0.27 has no CPU schedules of its own, so it would run single-threaded
and mostly scalar).

After legalization and fusion it inlines what it can, then per remaining block:

- injective (elementwise, broadcast, reshape, pack/unpack): the innermost loop is split
  by a vector width that divides it and vectorised (or left whole for LLVM when none
  does); all the other loops are fused and run in parallel; an unpack from NCHW16c on a
  large map reads each channel block's 16 channels next to the innermost loop;
- reduction (pooling, reduce, softmax's sums): the spatial loops go outside, fused and
  parallel; the reduction loops stay serial inside. When the innermost output axis is
  also the innermost, unit-stride axis of every access and the reduction is long (a
  column sum), that axis moves inside the reduction loops and is vectorised; short
  windows (3x3 pooling, NCHW depthwise) are left to LLVM, which unrolls the window and
  vectorises along W better (measured 91 vs 143 us on a 144-channel 56x56 depthwise).
  A long reduction whose innermost reduction axis is the unit-stride one (BatchNorm's
  statistics over N, H, W in NCHW) keeps a vector of partial sums (rfactor).

A block is inlined only into a single consumer (softmax's exp feeds two: inlining it
doubled the exps), and a producer whose output is larger than its inputs (a zero pad,
a broadcast) is not inlined into a reduction, where its guards would run per tap.

Small blocks stay on one thread (a parallel launch costs more than it saves). A
function the rule cannot analyse, or a schedule step that fails, leaves the function as
it was: slower, never wrong.
"""
from __future__ import annotations

import logging
from typing import Any

from .._tvm import tvm

log = logging.getLogger(__name__)

PARALLEL_MIN_WORK = 1 << 15      # loop iterations (incl. reduction) worth two threads
VECTOR_WIDTHS = (16, 8, 4)
SMALL_WINDOW = 32     # reduction sizes (3x3 pool/depthwise) LLVM unrolls and vectorises


def _const(x: Any) -> int | None:
    if isinstance(x, int):
        return x
    return int(x.value) if hasattr(x, "value") else None


def schedule_generic(func: Any) -> Any | None:
    """A scheduled copy of `func`, or None when nothing could be done."""
    t = tvm()
    from tvm.s_tir.dlight.analysis import normalize_prim_func
    sch = t.s_tir.Schedule(func)
    infos = normalize_prim_func(sch)
    if infos is None:
        return None
    infos = _inline(sch, infos)
    changed = False
    for info in infos:
        try:
            if info.is_injective():
                changed |= _spatial(sch, info.block_rv)
            elif info.is_reduction():
                changed |= _reduction(sch, info)
        except Exception as e:      # an unusual block: keep it serial
            log.debug("generic rule skipped block %s: %s", info.name, e)
    return sch if changed else None


def _extents(sch: Any, loops: list) -> list[int] | None:
    out = [_const(sch.get(lp).extent) for lp in loops]
    return None if any(e is None for e in out) else out


def _work(extents: list[int]) -> int:
    total = 1
    for e in extents:
        total *= e
    return total


def _spatial(sch: Any, block: Any) -> bool:
    loops = sch.get_loops(block)
    extents = _extents(sch, loops)
    if not loops or extents is None:
        return False
    loops, extents = _blocked_channel_tile(sch, block, loops, extents)
    width = next((v for v in VECTOR_WIDTHS if extents[-1] % v == 0), None)
    outer = list(loops[:-1])
    if width is not None:
        inner = loops[-1]
        if extents[-1] > width:
            lo, inner = sch.split(inner, [None, width])
            outer.append(lo)
        sch.vectorize(inner)
    # else: the innermost loop stays whole (LLVM vectorises it with a remainder loop);
    # fusing it into the parallel loop would put a div/mod in every index.
    if not outer:
        outer = [loops[-1]] if width is None else []
    if outer and _work(extents) >= PARALLEL_MIN_WORK:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    return True


BLOCK = 16           # the channel block of NCHW16c values (layout.BLOCK)
# bytes of x one channel block's plane spans below which its lines stay in L1 anyway
# (alone, 1 thread: 32x64x16x16 0.085 -> 0.080 ms, in the training step no gain)
TILE_MIN_BYTES = 32 << 10


def _blocked_channel_tile(sch: Any, block: Any, loops: list, extents: list[int]
                          ) -> tuple[list, list[int]]:
    """An unpack from NCHW16c (alone or fused with elementwise ops) reads x[n, c // 16,
    h, w, c % 16] for output (n, c, h, w): with c outside h and w, each 64-byte line of x
    is read by 16 channels a whole (h, w) plane apart, out of L1 by then (an 8 MB unpack
    of ResNet-18's 64x64 training step's stem: 1.65 ms). The channel loop is split by 16
    and its inner part moved next to the innermost loop, so that the 16 channels of a
    line are read while it is in L1 (Zen 5, 1 thread, CPU time, alone: 32x64x32x32
    1.31 -> 0.33 ms, fused with a multiply 2.76 -> 1.29 ms). (loops, extents) unchanged
    when no read is so or the plane is small."""
    t = tvm().tirx
    stmt = sch.get(block)
    iters = [iv.var for iv in stmt.iter_vars]
    # whole vectors along the innermost axis: with a row of 3 (a weight gradient's
    # (IC, OC/16, 3, 3, 16) read as (OC, IC, 3, 3)) 16 channels next to it would write
    # 16 rows 12 bytes at a time (measured 2.3 -> 6.2 ms)
    if len(iters) != len(loops) or len(loops) < 2 or extents[-1] % BLOCK:
        return loops, extents
    for region in stmt.reads:
        shape = region.source.shape
        if len(shape) < 2 or _const(shape[-1]) != BLOCK:
            continue
        last = region.region[-1].min
        if not (isinstance(last, t.FloorMod) and _const(last.b) == BLOCK):
            continue
        axis = next((i for i, v in enumerate(iters) if last.a.same_as(v)), None)
        if axis is None or axis >= len(loops) - 1 or extents[axis] % BLOCK or \
                4 * BLOCK * _work(extents[axis + 1:]) < TILE_MIN_BYTES:
            continue
        outer, inner = sch.split(loops[axis], [None, BLOCK])
        order = loops[:axis] + [outer] + loops[axis + 1:-1] + [inner, loops[-1]]
        sch.reorder(*order)
        sizes = extents[:axis] + [extents[axis] // BLOCK] + extents[axis + 1:-1] + \
            [BLOCK, extents[-1]]
        return order, sizes
    return loops, extents


def _inline(sch: Any, infos: list) -> list:
    """Inline injective blocks into their consumers where that is cheap; the rest stay."""
    remaining = []
    for info in infos:
        if info.is_injective() and _may_inline(sch, info.block_rv):
            try:
                sch.compute_inline(info.block_rv)
                continue
            except Exception:           # an output, or not inlinable: keep the block
                pass
        remaining.append(info)
    return remaining


def _may_inline(sch: Any, block: Any) -> bool:
    consumers = sch.get_consumers(block)
    if len(consumers) != 1:             # inlining into two consumers computes it twice
        return False
    data_par = tvm().tirx.IterVar.DataPar
    into_reduction = any(any(it.iter_type != data_par for it in sch.get(c).iter_vars)
                         for c in consumers)
    if not into_reduction:
        return True
    stmt = sch.get(block)
    size = lambda region: _work([_const(d) or 0 for d in region.source.shape])  # noqa: E731
    return all(size(w) <= max((size(r) for r in stmt.reads), default=0) for w in stmt.writes)


def _reduction(sch: Any, info: Any) -> bool:
    loops = [it.loop_rv for it in info.iters]
    extents = _extents(sch, loops)
    if extents is None or _work(extents) < PARALLEL_MIN_WORK:
        return False
    if any(it.kind not in ("S", "R") for it in info.iters):
        return False
    spatial = [it for it in info.iters if it.kind == "S"]
    reduce = [it.loop_rv for it in info.iters if it.kind == "R"]
    if not spatial:
        return False
    last = spatial[-1]
    width = None
    window = _work([_const(it.dom) or 0 for it in info.iters if it.kind == "R"])
    if window > SMALL_WINDOW and _contiguous_innermost(sch.get(info.block_rv), last.var):
        width = next((v for v in VECTOR_WIDTHS if (_const(last.dom) or 1) % v == 0), None)
    if width is None and window > SMALL_WINDOW and _partial_sums(sch, info, spatial):
        return True
    outer = [it.loop_rv for it in spatial[:-1]]
    if width is not None:           # (parallel outer, last/width, reduction, width)
        so, inner = sch.split(last.loop_rv, [None, width])
        sch.reorder(*outer, so, *reduce, inner)
        sch.vectorize(inner)
        outer.append(so)
    else:                           # keep the last spatial loop for LLVM to vectorise
        sch.reorder(*outer, last.loop_rv, *reduce)
        if not outer:
            outer = [last.loop_rv]
    sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    return True


def _partial_sums(sch: Any, info: Any, spatial: list) -> bool:
    """A reduction whose innermost reduction axis is the inputs' unit-stride one (a
    BatchNorm statistic of NCHW over N, H, W; its output's channels are strided): that
    axis is split by a vector width and rfactored, so each output accumulates `width`
    partial sums in one vector register over the window (~4.5x a scalar chain on a
    32x64x32x32 mean), then adds them up. False (nothing changed) when it does not fit."""
    reduce = [it for it in info.iters if it.kind == "R"]
    inner = reduce[-1]
    width = next((v for v in VECTOR_WIDTHS if (_const(inner.dom) or 1) % v == 0), None)
    if width is None or not _contiguous_innermost(sch.get(info.block_rv), inner.var):
        return False
    sch.reorder(*[it.loop_rv for it in spatial], *[it.loop_rv for it in reduce])
    _, lanes = sch.split(inner.loop_rv, [None, width])
    partial = sch.rfactor(lanes, 0)
    loops = sch.get_loops(partial)
    outer = loops[:len(spatial)]
    par = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    sch.parallel(par)
    sch.reverse_compute_at(info.block_rv, par)     # the partial sums' total, per output
    loops = sch.get_loops(partial)
    sch.vectorize(loops[-1])
    sch.decompose_reduction(partial, loops[1])
    return True


def _contiguous_innermost(block: Any, var: Any) -> bool:
    """`var` indexes only the last axis of every buffer `block` touches, with stride 1
    (or not at all): vector loads and stores along it are plain contiguous ones."""
    from tvm.sym.pattern import detect_linear_equation
    for region in (*block.reads, *block.writes):
        dims = region.region
        for i, r in enumerate(dims):
            coeff = detect_linear_equation(r.min, [var])
            if not coeff:
                return False
            step = _const(coeff[0])
            if step is None or step not in ((0, 1) if i == len(dims) - 1 else (0,)):
                return False
    return True


class GenericRule:
    """dlight ScheduleRule shape: apply(func, target, tunable) -> Schedule | None."""

    def apply(self, func: Any, target: Any, tunable: bool) -> Any | None:
        if not isinstance(func, tvm().tirx.PrimFunc):
            return None
        try:
            return schedule_generic(func)
        except Exception as e:
            log.debug("generic rule left a function unscheduled: %s", e)
            return None

    def is_target_available(self, target: Any) -> bool:
        return target.kind.name == "llvm"
