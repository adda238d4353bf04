"""TE compute -> scheduled PrimFunc that the Relax pipeline must leave alone.

A rule's PrimFunc is marked opaque (op_pattern 8) so that FuseOps/FuseTIR never merge it
with its neighbours (which would throw the schedule away), and "tirx.is_scheduled" so that
the generic rule skips it. "megtrace.flops" carries the useful work of one call, for
bench/profile_kernels.py's per-kernel GFLOP/s and share of the FMA peak.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .._tvm import tvm
from ..targets import host_target
from .layout import ceil_div

OPAQUE = 8          # relax OpPatternKind.kOpaque
# Below this many multiply-adds a kernel runs on one thread: a parallel launch costs a
# few microseconds, more than such a kernel takes (GapNet at batch 1: 10 us vs 5 us).
PARALLEL_MIN_MACS = 1 << 17


_LANES: dict[str, int] = {}      # vector_lanes by target


def vector_lanes() -> int:
    """float32 lanes of the widest vector register of the llvm target being built (the
    one in scope, `with target:` as pipelines.lower_graph enters it; else this host's):
    16 with AVX-512; 8 with AVX2, NEON, or where the hypervisor hides AVX-512 (targets.py
    subtracts avx512f). A 16-lane TIR vector is then two ymm registers, so register tiles
    must be half as wide: a library exported for "x86-avx2" on an AVX-512 host gets AVX2
    tiles."""
    t = tvm()
    target = t.target.Target.current(allow_none=True)
    if target is not None and target.kind.name != "llvm":
        target = None
    key = "host" if target is None else str(target)
    lanes = _LANES.get(key)
    if lanes is None:
        features = t.target.codegen.llvm_get_cpu_features(
            target if target is not None else t.target.Target(host_target()))
        lanes = _LANES[key] = 16 if "avx512f" in features else 8
    return lanes


def gemm_tile(m: int, n: int) -> tuple[int, int]:
    """(rows, columns) of the packed-GEMM register tile (dense, matmul, attention) for an
    m x n product on the target being built (vector_lanes). AVX-512: 8 x 32, 16 of the 32
    zmm as accumulators. AVX2 has 16 ymm: 8 x 32 would need 32 accumulators and spills
    (the encoder's 128 x 768 x 3072 at 22 GFLOP/s on a Zen 1 core); 6 x 16 and 4 x 16 (12
    or 8 ymm) ran at 36-37.7 there. Of 6 and 4 rows, the one that pads m least (6 on a
    tie)."""
    if vector_lanes() == 16:
        return min(8, m), 32 if n >= 32 else 16
    return (m if m <= 6 else min((6, 4), key=lambda r: ceil_div(m, r) * r)), 16


def parallel_if(sch: Any, loop: Any, macs: int) -> None:
    """Run `loop` on all threads when the kernel is big enough to pay for it."""
    if macs >= PARALLEL_MIN_MACS:
        sch.parallel(loop)


FLOPS_ATTR = "megtrace.flops"


def scheduled_func(tensors: Sequence[Any], schedule: Callable[[Any], None], rule: str,
                   flops: int = 0):
    """`tensors`: inputs then the output te.Tensor; `schedule(sch)` transforms the
    s_tir.Schedule of their PrimFunc in place; `flops`: see `mark`."""
    t = tvm()
    sch = t.s_tir.Schedule(t.te.create_prim_func(list(tensors)))
    schedule(sch)
    return mark(sch.mod["main"], rule, flops)


def mark(func, rule: str, flops: int = 0):
    """`func` as a rule's kernel; `flops`: the floating-point operations of the op it
    computes (2 per multiply-add, as a direct conv or GEMM would do them: padded tile
    columns and channels not counted, Winograd credited with the direct count), 0 where
    a rule has no such count (pooling)."""
    func = func.without_attr("global_symbol")
    attrs = [("op_pattern", OPAQUE), ("tirx.is_scheduled", True), ("megtrace.rule", rule)]
    if flops:
        attrs.append((FLOPS_ATTR, tvm().tirx.IntImm("int64", int(flops))))
    for key, value in attrs:
        func = func.with_attr(key, value)
    return func


def plain_func(tensors: Sequence[Any]):
    """An unscheduled PrimFunc (the generic rule schedules it after fusion)."""
    t = tvm()
    return t.te.create_prim_func(list(tensors)).without_attr("global_symbol")


def inner_loops(sch: Any, block: Any, above: Any) -> list:
    """The loops of `block` nested strictly inside loop `above` (the ones reverse_compute_at
    or decompose_reduction created); empty when the tile is a single element."""
    loops = sch.get_loops(block)
    target = sch.get(above)
    for i, lp in enumerate(loops):
        if sch.get(lp).same_as(target):
            return list(loops[i + 1:])
    return []


def vectorize_inner(sch: Any, block: Any, above: Any) -> None:
    """Vectorise the innermost loop of `block` below `above` and unroll the others: a
    register tile indexed by a rolled loop would make LLVM keep the whole tile in
    memory, also inside the kernel's main loop."""
    loops = inner_loops(sch, block, above)
    if loops:
        sch.vectorize(loops[-1])
    for lp in loops[:-1]:
        sch.unroll(lp)


def schedule_register_tile(sch, blk, batch: list, i, j, kk, mr: int, nr: int, ku: int,
                           flops: int) -> None:
    """The packed-GEMM micro-kernel shared by dense and matmul: an mr x nr accumulator
    tile in registers, k unrolled by ku, parallel over (batch, column, row) blocks, the
    epilogue ("out") computed per tile. vectorize/unroll come before
    decompose_reduction, as s_tir requires."""
    io, ii = sch.split(i, [None, mr])
    jo, ji = sch.split(j, [None, nr])
    ko, kin = sch.split(kk, [None, ku])
    sch.reorder(*batch, jo, io, ko, kin, ii, ji)
    par = sch.fuse(*batch, jo, io)
    parallel_if(sch, par, flops // 2)
    # "global": a tile under 1 KB (the 1 x 64 GEMV one) is then a stack array, not a
    # TVMBackendAllocWorkspace call per tile; the 8 x 32 GEMM tile is 1 KB, heap either way
    sch.set_scope(blk, 0, "global")
    o = sch.get_sblock("out")
    sch.reverse_compute_at(o, par)
    sch.vectorize(ji)
    sch.unroll(ii)
    sch.unroll(kin)
    init = sch.decompose_reduction(blk, ko)
    vectorize_inner(sch, init, par)
    vectorize_inner(sch, o, par)


def unravel(flat: Any, shape: Sequence[Any]) -> list:
    """The index (TIR expressions) of flat offset `flat` in a row-major array of `shape`."""
    t = tvm().tirx
    index = []
    for dim in reversed(shape):
        index.append(t.floormod(flat, dim))
        flat = t.floordiv(flat, dim)
    return list(reversed(index))


def prepend_in_loop(func, loop_name: str, make: Callable[[dict], Any]):
    """`func` with the statement make(enclosing loop vars by name, the loop's own
    included) run first in each iteration of the outermost loop named `loop_name`;
    `func` unchanged when there is none. For what s_tir cannot say (prefetches):
    rebuilds the root block, the loops and sequences on the way, nothing else."""
    t = tvm()
    tx, st = t.tirx, t.s_tir
    found = []

    def visit(s, env):
        if isinstance(s, st.SBlockRealize):
            return st.SBlockRealize(s.iter_values, s.predicate, visit(s.block, env))
        if isinstance(s, st.SBlock):
            return st.SBlock(s.iter_vars, s.reads, s.writes, s.name_hint, visit(s.body, env),
                             s.init, s.alloc_buffers, s.match_buffers, s.annotations)
        if isinstance(s, tx.SeqStmt):
            return tx.SeqStmt([visit(x, env) for x in s.seq])
        if isinstance(s, tx.For):
            env = {**env, s.loop_var.name: s.loop_var}
            if s.loop_var.name == loop_name and not found:
                found.append(s)
                body = tx.SeqStmt([make(env), s.body])
            else:
                body = visit(s.body, env)
            return tx.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_binding,
                          s.annotations, s.step)
        return s
    body = visit(func.body, {})
    return func.with_body(body) if found else func


def read_sources(func) -> dict[str, Any]:
    """The buffers the blocks of `func` read, by name (a prefetch addresses them)."""
    t = tvm()
    tx, st = t.tirx, t.s_tir
    out: dict[str, Any] = {}

    def visit(s):
        if isinstance(s, st.SBlockRealize):
            visit(s.block)
        elif isinstance(s, st.SBlock):
            for r in s.reads:
                out.setdefault(r.source.name, r.source)
            visit(s.body)
        elif isinstance(s, tx.SeqStmt):
            for x in s.seq:
                visit(x)
        elif isinstance(s, tx.For):
            visit(s.body)
    visit(func.body)
    return out
