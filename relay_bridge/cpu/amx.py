"""Dense GEMMs on AMX tiles, float32 in and out, each operand split into bfloat16 parts.

x = hi + lo with hi = bf16(x) and lo = bf16(x - hi) carries 16 of float32's 24 mantissa
bits; a @ b = ah @ bh + ah @ bl + al @ bh (al @ bl, ~2^-16 of each product, is dropped)
with the tiles accumulating in float32: three bf16 tile products (TDPBF16PS) do the work
of 16 x 16 x 32 multiply-adds each, where AVX-512 does 16 per FMA. On the Xeon host of
the encoder benchmark this ran the 128 x 768 x 768 GEMM at ~2.4x the packed-FMA rule
(dense.py); the error stays within a few 1e-6 of the largest output (float32 FMA
summation: ~1e-6). Not float32's: denormal inputs read as zero, and an infinite input
meeting a weight exact in bfloat16 (lo = 0: 0, 1, 0.5...) gives NaN (inf * 0 in
ah @ bl) where float32 gives +-inf.

The weight is split and packed at build time, one 1 KB tile per (16 columns, 32 k,
part): (N/16, K/32, 2, 16, 32) uint16, each row a pair of k for 16 columns (VNNI order).
The kernel splits A into (M/16, K/32, 2, 16, 32) tiles. A task is 32 columns of a row
group (A tiles of about 1 MB, all rows at batch 1: at batch 8 the 12 MB of A tiles of
the FFN's second GEMM would otherwise pass from L3 once per column block, -10%); it
goes over k in blocks of KC tile steps, whose 4 KB of weight tiles per step stay in L1
while each 16-row block of the group accumulates into two tiles (loaded from and
stored to the output between k blocks): one tile load per product leaves the kernel
bound by L2 bandwidth otherwise (128 x 768 x 768: 340 -> 414 GFLOP/s; KC 4 the same,
16 worse). The epilogue then runs in place on the task's block.
Linux lends AMX state to a process only after arch_prctl(ARCH_REQ_XCOMP_PERM): without
it the first tile instruction raises SIGILL, so the host target only gets `+amx-tile`
(targets.py), and the rule is only chosen, in a process where that request succeeded
(`MEGTRACE_AMX=0`: the FMA rule; deploy.py asks again before it loads such a library).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._tvm import tvm
from .epilogue import Epilogue
from .primfunc import parallel_if, scheduled_func

TILE_M, TILE_K, TASK_N = 16, 32, 32       # rows of A per tile, k per tile, columns per task
KC = 8                                    # tile steps of k per block


@dataclass(frozen=True)
class AmxShape:
    """out (m, n) = a (m, k) @ b (k, n)."""

    m: int
    k: int
    n: int

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.n // 16, self.k // TILE_K, 2, 16, 32)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def applies(m: int, k: int, n: int) -> bool:
    """Shapes the kernel covers without padding (m >= 16: a GEMV keeps the FMA rule)."""
    return m >= TILE_M and m % TILE_M == 0 and k % TILE_K == 0 and n % TASK_N == 0


def split_bf16(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 -> (hi, lo) bfloat16 bit patterns (uint16), rounded to nearest even as the
    kernel rounds; lo is 0 where hi is not finite."""
    x = np.ascontiguousarray(x, np.float32)
    hi = _round_bf16(x)
    with np.errstate(invalid="ignore"):                  # inf - inf: lo is 0 there
        rest = x - (hi.astype(np.uint32) << 16).view(np.float32)
    lo = np.where((hi & 0x7F80) == 0x7F80, np.uint16(0), _round_bf16(rest))
    return hi, lo.astype(np.uint16)


def _round_bf16(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def pack_weight(w: np.ndarray, transpose_b: bool) -> np.ndarray:
    """B of `A @ B` ((K, N), or (N, K) when `transpose_b`) -> (N/16, K/32, 2, 16, 32)
    uint16: [column block][k block][hi, lo][k pair][column, k parity]."""
    b = np.asarray(w, np.float32)
    b = b.T if transpose_b else b
    k, n = b.shape
    parts = np.stack(split_bf16(b))                               # (2, K, N)
    tiles = parts.reshape(2, k // TILE_K, 16, 2, n // 16, 16)     # part, kb, pair, par, cb, col
    return np.ascontiguousarray(tiles.transpose(4, 1, 0, 2, 5, 3)).reshape(
        n // 16, k // TILE_K, 2, 16, 32)


def tile_config() -> np.ndarray:
    """LDTILECFG's 64 bytes: palette 1, tiles 0-7 of 16 rows x 64 bytes."""
    cfg = np.zeros(64, np.uint8)
    cfg[0] = 1
    cfg[16:32] = np.array([64, 0] * 8, np.uint8)
    cfg[48:56] = 16
    return cfg


def _bf16_bits(t, x):
    """uint32 with x's bfloat16 (round to nearest even) in the low 16 bits."""
    u = t.reinterpret("uint32", x)
    one = t.const(1, "uint32")
    return (u + t.const(0x7FFF, "uint32") + ((u >> t.const(16, "uint32")) & one)) \
        >> t.const(16, "uint32")


def _split_value(t, x, part):
    hi = _bf16_bits(t, x)
    rest = x - t.reinterpret("float32", hi << t.const(16, "uint32"))
    finite = (hi & t.const(0x7F80, "uint32")) != t.const(0x7F80, "uint32")
    lo = t.Select(finite, _bf16_bits(t, rest), t.const(0, "uint32"))
    return t.Cast("uint16", t.Select(part == 0, hi, lo))


GROUP_BYTES = 1 << 20        # A tiles of a row group: about half of a 2 MB L2


def group_rows(m: int, k: int) -> int:
    """Rows of A whose tiles a group of tasks shares: all of them when they are at most
    1.5x GROUP_BYTES (a batch-1 GEMM then streams its weights once), else the most
    16-row blocks dividing m that fit GROUP_BYTES."""
    row_bytes = 4 * k                               # hi + lo bfloat16 per element
    if m * row_bytes <= GROUP_BYTES * 3 // 2:
        return m
    blocks = m // TILE_M
    fit = max(1, GROUP_BYTES // (row_bytes * TILE_M))
    return TILE_M * max(d for d in range(1, blocks + 1) if blocks % d == 0 and d <= fit)


def dense_amx(shape: AmxShape, epilogue: Epilogue | None = None):
    """Scheduled PrimFunc (a (m, k), packed b, tile config (64,) uint8, *epilogue vectors
    (n,), *epilogue tensors (m, n), out (m, n))."""
    te, t = tvm().te, tvm().tirx
    epilogue = epilogue or Epilogue()
    m, k, n = shape.m, shape.k, shape.n
    rb, kb, cb = m // TILE_M, k // TILE_K, n // TASK_N
    a = te.placeholder((m, k), "float32", name="a")
    b = te.placeholder(shape.weight_shape, "uint16", name="b")
    cfg = te.placeholder((64,), "uint8", name="cfg")
    vectors, tensors = epilogue.placeholders((n,), (m, n))
    a_tiles = te.compute((rb, kb, 2, 16, 32), lambda r, q, p, i, j: _split_value(
        t, a[r * 16 + i, q * 32 + j], p), name="a_tiles")

    def body(ins, outs):
        at, bt, config = ins[:3]
        vbufs, tbufs = ins[3:3 + len(vectors)], ins[3 + len(vectors):]
        c = outs[0]
        task = t.Var("task", "int32")
        q, kc, r = t.Var("q", "int32"), t.Var("kc", "int32"), t.Var("r", "int32")
        # a task: one column block of a row group; k in blocks of KC steps whose weight
        # tiles (KC x 4 KB) stay in L1 while the group's row blocks pass over them
        per = group_rows(m, k) // TILE_M
        g, col = t.floordiv(task, cb), t.floormod(task, cb)
        row = g * per + r
        kcn = KC if kb % KC == 0 else kb
        kq = kc * kcn + q

        def call(name, *args):
            return t.Evaluate(t.call_llvm_intrin("void", f"llvm.x86.{name}", *args))

        def i8(v):
            return t.const(v, "int8")

        def at_(buf, *idx):
            return t.address_of(t.BufferLoad(buf, list(idx)))
        stride = t.const(64, "int64")
        zero = t.const(0, "int32")
        loads = [call("tileloadd64", i8(2 + p), at_(at, row, kq, p, zero, zero), stride)
                 for p in (0, 1)]
        loads += [call("tileloadd64", i8(4 + 2 * h + p), at_(bt, col * 2 + h, kq, p, zero, zero),
                       stride) for h in (0, 1) for p in (0, 1)]
        # c_h += ah @ bh_h + ah @ bl_h + al @ bh_h
        dots = [call("tdpbf16ps", i8(h), i8(ta), i8(tb))
                for h in (0, 1) for ta, tb in ((2, 4 + 2 * h), (2, 5 + 2 * h), (3, 4 + 2 * h))]
        n_stride = t.const(n * 4, "int64")
        c_at = [at_(c, row * 16, col * TASK_N + 16 * h) for h in (0, 1)]
        first = t.SeqStmt([call("tilezero", i8(0)), call("tilezero", i8(1))])
        again = t.SeqStmt([call("tileloadd64", i8(h), c_at[h], n_stride) for h in (0, 1)])
        row_block = t.SeqStmt([
            t.IfThenElse(kc == 0, first, again),
            t.For(q, zero, t.const(kcn, "int32"), t.ForKind.SERIAL, t.SeqStmt(loads + dots)),
            *[call("tilestored64", i8(h), c_at[h], n_stride) for h in (0, 1)]])
        stmts = [call("ldtilecfg", at_(config, zero)),
                 t.For(kc, zero, t.const(kb // kcn, "int32"), t.ForKind.SERIAL,
                       t.For(r, zero, t.const(per, "int32"), t.ForKind.SERIAL, row_block))]
        if epilogue.steps:      # in place, on the block just stored (in L1/L2)
            i, j = t.Var("i", "int32"), t.Var("j", "int32")
            gi, gj = g * per * 16 + i, col * TASK_N + j
            value = epilogue.apply(t.BufferLoad(c, [gi, gj]),
                                   lambda v: t.BufferLoad(vbufs[v], [gj]),
                                   lambda v: t.BufferLoad(tbufs[v], [gi, gj]))
            inner = t.For(j, zero, t.const(TASK_N, "int32"), t.ForKind.VECTORIZED,
                          t.BufferStore(c, value, [gi, gj]))
            stmts.append(t.For(i, zero, t.const(per * 16, "int32"), t.ForKind.SERIAL, inner))
        kind = t.ForKind.PARALLEL if shape.flops // 2 >= (1 << 17) else t.ForKind.SERIAL
        return t.For(task, zero, t.const((m // (per * 16)) * cb, "int32"), kind, t.SeqStmt(stmts))

    out = te.extern((m, n), [a_tiles, b, cfg, *vectors, *tensors], body, name="amx",
                    dtype="float32")

    def schedule(sch):
        split = sch.get_sblock("a_tiles")
        r, q, p, i, j = sch.get_loops(split)
        parallel_if(sch, sch.fuse(r, q), shape.flops // 2)
        sch.vectorize(j)

    return scheduled_func([a, b, cfg, *vectors, *tensors, out], schedule, "dense_amx")
