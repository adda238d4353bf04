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
from typing import Any, Callable

import numpy as np

from .._tvm import tvm
from .epilogue import Epilogue
from .primfunc import PARALLEL_MIN_MACS, parallel_if, scheduled_func, unravel

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


def split_value(t, x, part):
    """TIR: the bfloat16 bits (uint16) of x's part 0 (hi) or 1 (lo), as split_bf16."""
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


@dataclass(frozen=True)
class TileRef:
    """A tile in memory: `buffer[index]` is its first element, rows `stride` elements
    apart (16 rows of 64 bytes)."""

    buffer: Any
    index: tuple
    stride: Any

    def address(self):
        t = tvm().tirx
        return t.address_of(t.BufferLoad(self.buffer, list(self.index)))

    def byte_stride(self):
        t = tvm().tirx
        size = self.buffer.dtype.bits // 8
        if isinstance(self.stride, int):
            return t.const(self.stride * size, "int64")
        return t.Cast("int64", self.stride) * t.const(size, "int64")


@dataclass(frozen=True)
class TileOperands:
    """Where one task's tiles live. `a(r, q, part)`: the A tile of row block r (of the
    task) at k step q, part 0 = hi, 1 = lo (16 rows of 32 bfloat16); `b(h, q, part)`: the
    packed weight tile of the task's column half h; `c(r, h)`: the float32 16 x 16
    output tile."""

    a: Callable[[Any, Any, int], TileRef]
    b: Callable[[int, Any, int], TileRef]
    c: Callable[[Any, int], TileRef]


class AmxTiles:
    """Emits the tile instructions (tiles 0-1: C, 2-3: A hi/lo, 4-7: B)."""

    def scope(self, body):
        return body

    def _call(self, name, *args):
        t = tvm().tirx
        return t.Evaluate(t.call_llvm_intrin("void", f"llvm.x86.{name}", *args))

    def config(self, cfg: TileRef):
        return self._call("ldtilecfg", cfg.address())

    def zero(self, tile: int):
        return self._call("tilezero", _i8(tile))

    def load(self, tile: int, ref: TileRef):
        return self._call("tileloadd64", _i8(tile), ref.address(), ref.byte_stride())

    def store(self, tile: int, ref: TileRef):
        return self._call("tilestored64", _i8(tile), ref.address(), ref.byte_stride())

    def dot(self, c: int, a: int, b: int):
        return self._call("tdpbf16ps", _i8(c), _i8(a), _i8(b))


def _i8(v: int):
    return tvm().tirx.const(v, "int8")


class EmulatedTiles(AmxTiles):
    """The same tile program in plain TIR on local arrays (no AMX needed): it checks a
    kernel's addressing -- strides, tap shifts, packing -- on any host (tests). TDPBF16PS
    is modelled as float32 sums of bfloat16 products in k order; the hardware's own
    rounding of the pair sums is not."""

    def __init__(self):
        t = tvm().tirx
        self.acc = t.decl_buffer((2, 16, 16), "float32", name="c_tiles", scope="local")
        self.ops = t.decl_buffer((6, 16, 32), "uint16", name="ab_tiles", scope="local")

    def scope(self, body):
        t = tvm().tirx
        return t.AllocBuffer(self.acc, t.AllocBuffer(self.ops, body))

    def config(self, cfg: TileRef):
        return tvm().tirx.Evaluate(0)

    def _rows(self, tile: int, cols: int, f):
        t = tvm().tirx
        i, j = t.Var("i", "int32"), t.Var("j", "int32")
        return t.For(i, t.const(0, "int32"), t.const(16, "int32"), t.ForKind.SERIAL,
                     t.For(j, t.const(0, "int32"), t.const(cols, "int32"), t.ForKind.SERIAL,
                           f(i, j)))

    def _tile(self, tile: int):
        return (self.acc, tile, 16) if tile < 2 else (self.ops, tile - 2, 32)

    def _at(self, ref: TileRef, i, j):
        """ref's element (i, j), as an index into its buffer (flat offset, unflattened)."""
        flat, size = 0, 1
        for dim, idx in zip(reversed(ref.buffer.shape), reversed(ref.index)):
            flat, size = flat + idx * size, size * dim
        return unravel(flat + i * ref.stride + j, ref.buffer.shape)

    def zero(self, tile: int):
        t = tvm().tirx
        buf, k, cols = self._tile(tile)
        return self._rows(tile, cols, lambda i, j: t.BufferStore(
            buf, t.const(0, buf.dtype), [k, i, j]))

    def load(self, tile: int, ref: TileRef):
        t = tvm().tirx
        buf, k, cols = self._tile(tile)
        return self._rows(tile, cols, lambda i, j: t.BufferStore(
            buf, t.BufferLoad(ref.buffer, self._at(ref, i, j)), [k, i, j]))

    def store(self, tile: int, ref: TileRef):
        t = tvm().tirx
        buf, k, cols = self._tile(tile)
        return self._rows(tile, cols, lambda i, j: t.BufferStore(
            ref.buffer, t.BufferLoad(buf, [k, i, j]), self._at(ref, i, j)))

    def dot(self, c: int, a: int, b: int):
        t = tvm().tirx
        kk = t.Var("kk", "int32")

        def f32(bits):
            return t.reinterpret("float32", t.Cast("uint32", bits) << t.const(16, "uint32"))

        def body(i, j):
            total = t.BufferLoad(self.acc, [c, i, j])
            for par in (0, 1):
                total = total + f32(t.BufferLoad(self.ops, [a - 2, i, kk * 2 + par])) * \
                    f32(t.BufferLoad(self.ops, [b - 2, kk, j * 2 + par]))
            return t.For(kk, t.const(0, "int32"), t.const(16, "int32"), t.ForKind.SERIAL,
                         t.BufferStore(self.acc, total, [c, i, j]))
        return self._rows(c, 16, body)


def k_block(steps: int, divisor: bool = False) -> int:
    """Tile steps of k per block: KC when they divide, else all of them (dense), or with
    `divisor` the most up to KC that divide (a conv's 9 taps x 2 channel tiles: 18 steps
    of weight tiles, 72 KB, would not stay in L1)."""
    if divisor:
        return max(d for d in range(1, KC + 1) if steps % d == 0)
    return KC if steps % KC == 0 else steps


def accumulate(tiles: AmxTiles, ops: TileOperands, row_blocks: Any, steps: int,
               config: TileRef, kcn: int | None = None) -> Any:
    """One task of the tile GEMM (amx.py's dense and amx_conv.py's conv share it): 32
    columns of `row_blocks` (int or PrimExpr) 16-row blocks over `steps` k steps. k goes
    in blocks whose weight tiles (4 KB a step) stay in L1 while each row block
    accumulates into two tiles, loaded from and stored to the output between k blocks
    (one tile load per product leaves the kernel bound by L2 bandwidth otherwise);
    c_h += ah @ bh_h + ah @ bl_h + al @ bh_h. `config`: `tile_config()`'s bytes; `kcn`: k steps per
    block (default `k_block(steps)`)."""
    t = tvm().tirx
    q, kc, r = t.Var("q", "int32"), t.Var("kc", "int32"), t.Var("r", "int32")
    kcn = kcn or k_block(steps)
    kq = kc * kcn + q
    loads = [tiles.load(2 + p, ops.a(r, kq, p)) for p in (0, 1)]
    loads += [tiles.load(4 + 2 * h + p, ops.b(h, kq, p)) for h in (0, 1) for p in (0, 1)]
    dots = [tiles.dot(h, ta, tb)
            for h in (0, 1) for ta, tb in ((2, 4 + 2 * h), (2, 5 + 2 * h), (3, 4 + 2 * h))]
    c_at = [ops.c(r, h) for h in (0, 1)]
    first = t.SeqStmt([tiles.zero(0), tiles.zero(1)])
    again = t.SeqStmt([tiles.load(h, c_at[h]) for h in (0, 1)])
    zero = t.const(0, "int32")
    row_block = t.SeqStmt([
        t.IfThenElse(kc == 0, first, again),
        t.For(q, zero, t.const(kcn, "int32"), t.ForKind.SERIAL, t.SeqStmt(loads + dots)),
        *[tiles.store(h, c_at[h]) for h in (0, 1)]])
    return tiles.scope(t.SeqStmt([
        tiles.config(config),
        t.For(kc, zero, t.const(steps // kcn, "int32"), t.ForKind.SERIAL,
              t.For(r, zero, t.const(row_blocks, "int32") if isinstance(row_blocks, int)
                    else row_blocks, t.ForKind.SERIAL, row_block))]))


def task_loop(task, tasks: int, macs: int, body, parallel: bool = True) -> Any:
    """The loop over a kernel's tasks, on all threads when it pays (primfunc.py)."""
    t = tvm().tirx
    kind = t.ForKind.PARALLEL if parallel and macs >= PARALLEL_MIN_MACS \
        else t.ForKind.SERIAL
    return t.For(task, t.const(0, "int32"), t.const(tasks, "int32"), kind, body)


def dense_amx(shape: AmxShape, epilogue: Epilogue | None = None, emulate: bool = False):
    """Scheduled PrimFunc (a (m, k), packed b, tile config (64,) uint8, *epilogue vectors
    (n,), *epilogue tensors (m, n), out (m, n)); `emulate`: EmulatedTiles (tests)."""
    te, t = tvm().te, tvm().tirx
    tiles = EmulatedTiles() if emulate else AmxTiles()
    epilogue = epilogue or Epilogue()
    m, k, n = shape.m, shape.k, shape.n
    rb, kb, cb = m // TILE_M, k // TILE_K, n // TASK_N
    a = te.placeholder((m, k), "float32", name="a")
    b = te.placeholder(shape.weight_shape, "uint16", name="b")
    cfg = te.placeholder((64,), "uint8", name="cfg")
    vectors, tensors = epilogue.placeholders((n,), (m, n))
    a_tiles = te.compute((rb, kb, 2, 16, 32), lambda r, q, p, i, j: split_value(
        t, a[r * 16 + i, q * 32 + j], p), name="a_tiles")

    def body(ins, outs):
        at, bt, config = ins[:3]
        vbufs, tbufs = ins[3:3 + len(vectors)], ins[3 + len(vectors):]
        c = outs[0]
        task = t.Var("task", "int32")
        # a task: one column block of a row group
        per = group_rows(m, k) // TILE_M
        g, col = t.floordiv(task, cb), t.floormod(task, cb)
        zero = t.const(0, "int32")
        ops = TileOperands(
            a=lambda r, q, p: TileRef(at, (g * per + r, q, p, zero, zero), 32),
            b=lambda h, q, p: TileRef(bt, (col * 2 + h, q, p, zero, zero), 32),
            c=lambda r, h: TileRef(c, ((g * per + r) * 16, col * TASK_N + 16 * h), n))
        stmts = [accumulate(tiles, ops, per, kb, TileRef(config, (zero,), 0))]
        if epilogue.steps:      # in place, on the block just stored (in L1/L2)
            i, j = t.Var("i", "int32"), t.Var("j", "int32")
            gi, gj = g * per * 16 + i, col * TASK_N + j
            value = epilogue.apply(t.BufferLoad(c, [gi, gj]),
                                   lambda v: t.BufferLoad(vbufs[v], [gj]),
                                   lambda v: t.BufferLoad(tbufs[v], [gi, gj]))
            inner = t.For(j, zero, t.const(TASK_N, "int32"), t.ForKind.VECTORIZED,
                          t.BufferStore(c, value, [gi, gj]))
            stmts.append(t.For(i, zero, t.const(per * 16, "int32"), t.ForKind.SERIAL, inner))
        return task_loop(task, (m // (per * 16)) * cb, shape.flops // 2, t.SeqStmt(stmts),
                         not emulate)

    out = te.extern((m, n), [a_tiles, b, cfg, *vectors, *tensors], body, name="amx",
                    dtype="float32")

    def schedule(sch):
        split = sch.get_sblock("a_tiles")
        r, q, p, i, j = sch.get_loops(split)
        parallel_if(sch, sch.fuse(r, q), shape.flops // 2)
        sch.vectorize(j)

    return scheduled_func([a, b, cfg, *vectors, *tensors, out], schedule, "dense_amx",
                          shape.flops)
