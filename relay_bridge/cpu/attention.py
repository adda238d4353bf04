"""Attention as one kernel: softmax(q @ k^T [scaled]) @ v, per head and block of rows.

Lowered op by op, q @ k^T writes a (heads, s, t) score tensor, softmax reads and writes
it in four passes and p @ v reads it again, each a separate parallel kernel, and q, k, v
are first copied out of the QKV projection by transpose and slice kernels. Here, per
(batch, head) the kernel packs k^T once (t/nr, d, nr), then for every block of mr query
rows computes the mr x t scores with the packed-GEMM register tile, their row max, exp
and sum (16 lane partials, as rowwise.py), scales them by one reciprocal per row and
computes the mr x dv output, all in L1. q, k and v are read through strided views of
their bases (views.py), so the transposes and slices are never computed; with
`heads_last` the output is written (b, s, h, dv), as multi-head attention merges heads.
Each row block also prefetches part of the next head's rows (at batch 8 they are in L3).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .._tvm import tvm
from . import fast_math
from .epilogue import Epilogue
from .layout import ceil_div
from .primfunc import (gemm_tile, inner_loops, parallel_if, prepend_in_loop, read_sources,
                       scheduled_func, vectorize_inner)
from .rowwise import LANES, row_reduce
from .views import StridedView

ENV = "MEGTRACE_FUSED_ATTENTION"       # 0/off: q @ k^T, softmax and p @ v as three kernels


def mode() -> str:
    """"on" (the default) or "off", from MEGTRACE_FUSED_ATTENTION."""
    value = os.environ.get(ENV, "1").strip().lower()
    return "off" if value in ("0", "off", "false", "no") else "on"


@dataclass(frozen=True)
class AttentionShape:
    """q (*batch, s, d), k (*batch, t, d), v (*batch, t, dv) as views of their bases
    (`bases[i]`: the element count of base i; q/k/v_base: which base each reads)."""

    batch: tuple[int, ...]
    q: StridedView
    k: StridedView
    v: StridedView
    bases: tuple[int, ...]
    q_base: int
    k_base: int
    v_base: int

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """(s, t, d, dv)."""
        return self.q.shape[-2], self.k.shape[-2], self.q.shape[-1], self.v.shape[-1]

    @property
    def out(self) -> tuple[int, ...]:
        s, _, _, dv = self.sizes
        return self.batch + (s, dv)

    @property
    def nb(self) -> int:
        n = 1
        for d in self.batch:
            n *= d
        return n

    @property
    def flops(self) -> int:
        s, t, d, dv = self.sizes
        return 2 * self.nb * s * t * (d + dv)


def applies(shape: AttentionShape) -> bool:
    """Key and value lengths and dv in whole 16-lane vectors (softmax's lane partials,
    the output tile); every operand with the batch axes in front; int32 offsets."""
    s, t, d, dv = shape.sizes
    nd = len(shape.batch)
    return (t % LANES == 0 and dv % LANES == 0 and s >= 1 and d >= 1
            and max(shape.bases) < 2 ** 31 and shape.nb * s * dv < 2 ** 31   # int32 offsets
            and all(v.shape[:nd] == shape.batch and len(v.shape) == nd + 2
                    for v in (shape.q, shape.k, shape.v)))


def _tile(s: int, n: int) -> int:
    """Register tile columns along t (scores) or dv (output) for s query rows: gemm_tile's,
    16 where n is not a whole number of them."""
    nr = gemm_tile(s, n)[1]
    return nr if n % nr == 0 else 16


def attention(shape: AttentionShape, scores: Epilogue, epilogue: Epilogue | None = None,
              heads_last: bool = False):
    """Scheduled PrimFunc (*flat bases, *epilogue vectors (dv,), out): out is (prod(batch),
    s, dv), or (prod(batch) / h, s, h, dv) with `heads_last` (h: the last batch axis).
    `scores`: scalar-only steps on q @ k^T before the softmax (the 1/sqrt(d) scale)."""
    te, t = tvm().te, tvm().tirx
    epilogue = epilogue or Epilogue()
    s, tk, d, dv = shape.sizes
    nb, batch = shape.nb, shape.batch
    mr = gemm_tile(s, max(tk, dv))[0]
    sp = ceil_div(s, mr) * mr
    nr, nv = _tile(s, tk), _tile(s, dv)
    bases = [te.placeholder((n,), "float32", name=f"base{i}") for i, n in enumerate(shape.bases)]
    vectors, _ = epilogue.placeholders((dv,), (nb, s, dv))

    def unravel(bb):
        idx = []
        for dim in reversed(batch):
            idx.append(t.floormod(bb, dim) if dim > 1 else t.const(0, "int32"))
            bb = t.floordiv(bb, dim)
        return list(reversed(idx))

    def read(view: StridedView, base, bb, i, j):
        return bases[base][view.flat_index([*unravel(bb), i, j])]

    # k^T packed per head: (nb, t/nr, d, nr)
    kp = te.compute((nb, tk // nr, d, nr), lambda bb, jo, c, ji: read(
        shape.k, shape.k_base, bb, jo * nr + ji, c), name="pack_k")
    r = te.reduce_axis((0, d), "c")
    qrow = (lambda i: t.min(i, s - 1)) if sp != s else (lambda i: i)
    score = te.compute((nb, sp, tk), lambda bb, i, j: te.sum(
        read(shape.q, shape.q_base, bb, qrow(i), r) * kp[bb, j // nr, r, j % nr], axis=r),
        name="score")
    scaled = te.compute((nb, sp, tk), lambda bb, i, j: scores.apply(
        score[bb, i, j], None, None), name="scaled")
    peak = row_reduce(lambda bb, i, j: scaled[bb, i, j], [nb, sp], tk, "max", "att_max")
    prob = te.compute((nb, sp, tk), lambda bb, i, j: fast_math.fast_exp(
        scaled[bb, i, j] - peak[bb, i]), name="att_exp")
    total = row_reduce(lambda bb, i, j: prob[bb, i, j], [nb, sp], tk, "sum", "att_sum")
    inv = te.compute((nb, sp), lambda bb, i: t.const(1.0, "float32") / total[bb, i],
                     name="att_inv")       # one division per row, not per probability
    norm = te.compute((nb, sp, tk), lambda bb, i, j: prob[bb, i, j] * inv[bb, i],
                      name="att_norm")
    rj = te.reduce_axis((0, tk), "j")
    acc = te.compute((nb, sp, dv), lambda bb, i, c: te.sum(
        norm[bb, i, rj] * read(shape.v, shape.v_base, bb, rj, c), axis=rj), name="att_out")
    if heads_last:      # (b, s, h, dv): the (b, h, s, dv) result with h and s swapped
        h = batch[-1]
        out = te.compute((nb // h, s, h, dv), lambda b, i, hh, c: epilogue.apply(
            acc[b * h + hh, i, c], lambda q: vectors[q][c], None), name="out")
    else:
        out = te.compute((nb, s, dv), lambda bb, i, c: epilogue.apply(
            acc[bb, i, c], lambda q: vectors[q][c], None), name="out")

    def schedule(sch):
        sch.compute_inline(sch.get_sblock("scaled"))
        # output: batch (parallel) > row block > dv block > j > rows x dv lanes (registers)
        blk = sch.get_sblock("att_out")
        bb, i, c, j = sch.get_loops(blk)
        io, ii = sch.split(i, [None, mr])
        co, ci = sch.split(c, [None, nv])
        jo, ji = sch.split(j, [None, 4])
        sch.reorder(bb, io, co, jo, ji, ii, ci)
        parallel_if(sch, bb, shape.flops // 2)
        sch.set_scope(blk, 0, "local")
        o = sch.get_sblock("out")
        sch.reverse_compute_at(o, co)
        sch.vectorize(ci)
        sch.unroll(ii)
        sch.unroll(ji)
        init = sch.decompose_reduction(blk, jo)
        vectorize_inner(sch, init, co)
        vectorize_inner(sch, o, co)
        # softmax of the row block, in the order its consumers need it
        for name in ("att_norm", "att_inv", "att_sum", "att_sum_lanes", "att_exp", "att_max",
                     "att_max_lanes", "score"):
            sch.compute_at(sch.get_sblock(name), io)
        for name in ("att_sum_lanes", "att_max_lanes"):
            b = sch.get_sblock(name)
            loops = inner_loops(sch, b, io)
            sch.vectorize(loops[1])     # (row, lane, q); no q loop when t is one vector
            if len(loops) == 3:
                sch.reorder(loops[0], loops[2], loops[1])
                sch.decompose_reduction(b, loops[2])
        for name in ("att_exp", "att_norm"):
            jj = sch.get_loops(sch.get_sblock(name))[-1]
            _, jv = sch.split(jj, [None, LANES])
            sch.vectorize(jv)
        # scores: the packed-GEMM register tile over (rows, t)
        b = sch.get_sblock("score")
        i2, j2, c2 = sch.get_loops(b)[-3:]
        j2o, j2i = sch.split(j2, [None, nr])
        ku = next(u for u in (4, 2, 1) if d % u == 0)
        c2o, c2i = sch.split(c2, [None, ku])
        sch.reorder(j2o, c2o, c2i, i2, j2i)
        sch.set_scope(b, 0, "local")
        sch.vectorize(j2i)
        sch.unroll(i2)
        sch.unroll(c2i)
        sinit = sch.decompose_reduction(b, c2o)
        vectorize_inner(sch, sinit, j2o)
        # k^T packed once per head, before the row blocks
        p = sch.get_sblock("pack_k")
        sch.compute_at(p, bb)
        sch.vectorize(sch.get_loops(p)[-1])

    func = scheduled_func([*bases, *vectors, out], schedule, "attention", shape.flops)
    return _prefetch_next_head(func, shape, unravel, mr) if nb > 1 else func


def _prefetch_next_head(func, shape: AttentionShape, unravel, mr: int):
    """Each row block also asks for 1/(row blocks) of the next head's q, k and v rows
    (into L2): at batch 8 they come from L3, row by row, which the hardware prefetchers
    (one 4 KB page per row) do not foresee."""
    t = tvm().tirx
    s, tk, d, dv = shape.sizes
    blocks = ceil_div(s, mr)
    sources = read_sources(func)
    bases = [sources[f"base{i}"] for i in range(len(shape.bases))]

    def make(env):
        bb, io = env["bb"], env["i_0"]
        nxt = unravel(t.min(bb + 1, shape.nb - 1))
        loops = []
        for view, base, rows, width in ((shape.q, shape.q_base, s, d),
                                        (shape.k, shape.k_base, tk, d),
                                        (shape.v, shape.v_base, tk, dv)):
            chunks = ceil_div(width, LANES)
            per = ceil_div(rows * chunks, blocks)
            p = t.Var("p", "int32")
            line = io * per + p
            row = t.min(t.floordiv(line, chunks), rows - 1)
            at = view.flat_index([*nxt, row, t.floormod(line, chunks) * LANES])
            call = t.call_llvm_intrin("void", "llvm.prefetch", t.address_of(
                t.BufferLoad(bases[base], [at])), t.const(0, "int32"), t.const(2, "int32"),
                t.const(1, "int32"))
            loops.append(t.For(p, t.const(0, "int32"), t.const(per, "int32"),
                               t.ForKind.SERIAL, t.Evaluate(call)))
        return t.SeqStmt(loops)
    return prepend_in_loop(func, "i_0", make)
