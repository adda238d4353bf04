"""conv2d 3x3, stride 1, groups 1 by Winograd F(4x4, 3x3) on NCHW16c.

A direct 3x3 convolution already runs at the FMA bound (conv.py), so the only way to go
faster is fewer multiplications: F(4x4, 3x3) computes a 4x4 output tile from a 6x6
input tile with 36 multiply-adds per (input, output) channel pair instead of 144.

    U = G g G^T        weights, transformed and packed once at build time (NumPy)
    V = B^T d B        every 6x6 input tile (stride 4), per input channel
    M = U * V          36 independent GEMMs: tiles x in-channels @ in-channels x out-channels
    Y = A^T M A        4x4 output tile, then the fused epilogue (bias, BN, ReLU, residual)

All four stages live in one PrimFunc. The GEMM is a packed register tile (mr tiles x
kb x 16 output channels of accumulators, kb weight vector loads and mr broadcasts per
reduction step), sized for the host's vector registers: 8 x 2 x 16 with AVX-512 when the
output blocks pair up (16 of 32 zmm; else 14 x 16), 6 x 16 with AVX2 (12 of 16 ymm),
see `gemm_channel_blocks`. The transforms are sums with the
small integer coefficients of B^T and A^T written out term by term (no multiply by 0
or 1): each is computed per tile in registers, 16 channels per vector.

Points 0, +-1, +-2 and infinity (Lavin & Gray 2016); the float32 error stays within
1e-5 of the direct convolution's scale for unit-scale data (tests/cpu_rules).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._tvm import tvm
from .conv import ConvShape, padded_input
from .epilogue import Epilogue, blocked_output
from .layout import BLOCK, blocks, ceil_div
from .primfunc import inner_loops, parallel_if, scheduled_func, vector_lanes, vectorize_inner

TILE, KERNEL = 4, 3                 # F(4x4, 3x3)
ALPHA = TILE + KERNEL - 1           # 6x6 transformed tile

# Input transform B^T (6x6), weight transform G (6x3), output transform A^T (4x6).
B_T = np.array([[4, 0, -5, 0, 1, 0],
                [0, -4, -4, 1, 1, 0],
                [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0],
                [0, 2, -1, -2, 1, 0],
                [0, 4, 0, -5, 0, 1]], np.float64)
G = np.array([[1 / 4, 0, 0],
              [-1 / 6, -1 / 6, -1 / 6],
              [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6],
              [0, 0, 1]], np.float64)
A_T = np.array([[1, 1, 1, 1, 1, 0],
                [0, 1, -1, 2, -2, 0],
                [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]], np.float64)

ENV = "MEGTRACE_WINOGRAD"           # 0/off: never; "all": every eligible conv; else cost rule


def mode() -> str:
    """"off", "all" or "auto" (the cost rule), from MEGTRACE_WINOGRAD."""
    value = os.environ.get(ENV, "auto").strip().lower()
    if value in ("0", "false", "off", "no"):
        return "off"
    return "all" if value in ("all", "force", "always") else "auto"


def gemm_channel_blocks(oc_blocks: int, lanes: int) -> int:
    """Output-channel blocks per GEMM register tile: 2 with AVX-512 when they divide (each
    broadcast tile value then feeds 2 FMAs: 2 weight loads + r broadcasts per 2r FMAs
    instead of 1 + r per r). Measured on the Xeon host (1 thread, alternating builds):
    ResNet-18's 3x3 layers 0.77 -> 0.68 ms (64 ch @56), 0.77 -> 0.61 (128 @28),
    1.57 -> 1.14 (256 @14), batch 8 at 512 @7 9.4 -> 7.4 ms."""
    return 2 if lanes == 16 and oc_blocks % 2 == 0 else 1


def register_rows(tiles: int, lanes: int, kb: int = 1) -> int:
    """Tiles per GEMM register block: at most what the registers hold (kb 16-channel rows
    of accumulators per tile plus kb weight vectors and a broadcast: 2 x 8 or 1 x 14 of
    AVX-512's 32, 1 x 6 of AVX2's 16). Cost of a choice: the rows computed (the last
    block is padded) times (1 + 1/r) for the per-block loads that `r` rows share."""
    if kb == 2:
        lo, hi = 6, 8
    else:
        lo, hi = (8, 14) if lanes == 16 else (4, 6)
    if tiles <= hi:
        return tiles
    return min(range(lo, hi + 1), key=lambda r: (ceil_div(tiles, r) * r * (1 + 1 / r), -r))


@dataclass(frozen=True)
class WinogradShape:
    """A 3x3 stride-1 conv (`ConvShape`) on a blocked input, cut into 4x4 output tiles."""

    conv: ConvShape

    def __post_init__(self):
        c = self.conv
        if (c.kh, c.kw) != (KERNEL, KERNEL) or c.stride != (1, 1) or not c.blocked_input:
            raise ValueError(f"winograd: needs a 3x3 stride-1 conv on NCHW16c; got {c}")

    @property
    def tiles_hw(self) -> tuple[int, int]:
        return ceil_div(self.conv.oh, TILE), ceil_div(self.conv.ow, TILE)

    @property
    def tiles(self) -> int:
        th, tw = self.tiles_hw
        return self.conv.n * th * tw

    @property
    def channel_blocks(self) -> int:
        return gemm_channel_blocks(blocks(self.conv.oc), vector_lanes())

    @property
    def rows(self) -> int:
        return register_rows(self.tiles, vector_lanes(), self.channel_blocks)

    @property
    def padded_tiles(self) -> int:
        return ceil_div(self.tiles, self.rows) * self.rows

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (ALPHA, ALPHA, blocks(self.conv.oc), blocks(self.conv.c), BLOCK, BLOCK)

    @property
    def gemm_macs(self) -> int:
        return ALPHA * ALPHA * self.padded_tiles * blocks(self.conv.c) * blocks(self.conv.oc) \
            * BLOCK * BLOCK


# U = G w G^T for all 36 (a, b) at once: KRON[r*3+s, a*6+b] = G[a, r] G[b, s]
KRON = np.kron(G, G).T.copy()


def transform_weight(w: np.ndarray) -> np.ndarray:
    """(OC, IC, 3, 3) -> U = G w G^T packed as (6, 6, OC/16, IC/16, 16i, 16o), zero-padded;
    done in float64 at build time so the kernel never transforms weights."""
    oc, ic = w.shape[:2]
    ob, ib = blocks(oc), blocks(ic)
    out = np.empty((ALPHA, ALPHA, ob, ib, BLOCK, BLOCK), np.float32)
    # one output-channel block at a time: a (16*IC, 9) x (9, 36) product whose float64
    # result stays in cache for the packing copy (batched 3x3 matmuls over the whole
    # weight took ~4-10x as long on ResNet-18: first-call build time, issue 11)
    rows = np.zeros((BLOCK, ib * BLOCK, KERNEL * KERNEL))  # zero channels transform to zero
    for k in range(ob):
        part = w[k * BLOCK:(k + 1) * BLOCK].reshape(-1, ic, KERNEL * KERNEL)
        rows[:part.shape[0], :ic] = part
        rows[part.shape[0]:] = 0.0
        # einsum's own loop, not BLAS: OpenBLAS threads on these thin products burnt
        # ~10x the CPU (and wall time on a busy machine)
        u = np.einsum("nk,km->nm", rows.reshape(-1, KERNEL * KERNEL), KRON)
        u = u.reshape(BLOCK, ib, BLOCK, ALPHA, ALPHA)
        out[:, :, k] = u.transpose(3, 4, 1, 2, 0)          # (a, b, ib, 16i, 16o)
    return out


def te_transform_weight(packed):
    """te version of `transform_weight` for a weight computed at run time (a training
    step's parameters): U = G w G^T from the direct rule's packed weight
    (OC/16, IC/16, 3, 3, 16i, 16o), whose 16 output channels are contiguous, so each
    of the 36 planes is a sum of at most 9 whole vectors (see `weight_transform_func`)."""
    te = tvm().te
    ob, ib = (int(d) for d in packed.shape[:2])

    def f(a, b, o, i, ii, oo):
        taps = [packed[o, i, r, s, ii, oo] for r in range(KERNEL) for s in range(KERNEL)]
        return _select(a, [_select(b, [_combine(KRON[:, p * ALPHA + q], taps)
                                       for q in range(ALPHA)]) for p in range(ALPHA)])
    return te.compute((ALPHA, ALPHA, ob, ib, BLOCK, BLOCK), f, name="u")


def weight_transform_func(oc: int, ic: int):
    """Scheduled PrimFunc (packed weight, U): parallel over channel blocks, the 36
    planes unrolled so that the coefficient Selects fold, 16 output channels a vector."""
    te = tvm().te
    packed = te.placeholder((blocks(oc), blocks(ic), KERNEL, KERNEL, BLOCK, BLOCK),
                            "float32", name="w")
    u = te_transform_weight(packed)

    def schedule(sch):
        a, b, o, i, ii, oo = sch.get_loops(sch.get_sblock("u"))
        sch.reorder(o, i, ii, a, b, oo)
        parallel_if(sch, sch.fuse(o, i), ALPHA * ALPHA * KERNEL * KERNEL * ic * oc)
        sch.unroll(a)
        sch.unroll(b)
        sch.vectorize(oo)
    return scheduled_func([packed, u], schedule, "winograd_weight")


def applies(conv: ConvShape) -> bool:
    """The convs this rule can compute (dilation 1 and groups 1 are plan.py's)."""
    return (conv.kh, conv.kw) == (KERNEL, KERNEL) and conv.stride == (1, 1) \
        and conv.blocked_input


# MACs the FMA units do while one byte of weight streams in from beyond L2. A network's
# weights do not stay in L2 between calls, so each call reads every layer's weight once
# (the GEMM and the direct tile both reuse a weight slice while it is cached). Measured
# on the Xeon host (AVX-512, bench/profile_kernels.py --clock cpu, batch 1, 1 thread):
# ResNet-18's 512-channel Winograd weight (37.7 MB, 4 tiles per weight vector) took
# 3.4 ms per conv, ~11 GB/s, while the direct rule does ~75 GMAC/s: ~7 MACs per byte.
STREAM_MACS_PER_BYTE = 7

# The Winograd rule's time per GEMM multiply-add, counting its input and output
# transforms: ResNet-18's 64- and 128-channel layers (56x56, 28x28) ran 2.1-2.2x faster
# than the direct rule with a GEMM 3.5-4x smaller.
TRANSFORM_FACTOR = 2


def direct_cost(conv: ConvShape) -> float:
    """The direct rule's modelled time in MACs: its multiply-adds, or its weight's
    streaming time where that is longer."""
    weight = 4 * conv.oc * conv.c * conv.kh * conv.kw
    return max(conv.flops / 2, STREAM_MACS_PER_BYTE * weight)


def winograd_cost(conv: ConvShape) -> float:
    """The Winograd rule's modelled time in MACs: GEMM plus transforms, or its weight's
    streaming time (36/9 = 4x the direct weight) where that is longer -- which it is at
    batch 1 on small maps with wide channels (ResNet's 512 channels at 7x7: 4 tiles per
    weight vector)."""
    shape = WinogradShape(conv)
    weight = 4 * ALPHA * ALPHA * blocks(conv.c) * blocks(conv.oc) * BLOCK * BLOCK
    return max(TRANSFORM_FACTOR * shape.gemm_macs, STREAM_MACS_PER_BYTE * weight)


def worth_it(conv: ConvShape) -> bool:
    """The per-layer choice between Winograd and the direct rule, by modelled cost (a
    pure function of the shape, so it is deterministic and the compile cache key holds).
    Below 64 channels the transforms (a few passes over input and output per GEMM) are
    a larger share than the model counts, and small maps waste much of their padded 4x4
    tiles: ask for 64 channels each way. Measured (bench/bench_cpu.py, znver4 with AVX2)
    Winograd beat the direct rule 1.7-3x on ResNet-18's 3x3 layers; at batch 1 on the
    Xeon host the 512-channel 7x7 layers ran 1.8x slower with it (weight streaming),
    which the cost model now sends to the direct rule."""
    if not applies(conv) or conv.c < 64 or conv.oc < 64:
        return False
    return direct_cost(conv) > winograd_cost(conv)


def _combine(coefs, terms):
    """sum(c * t) over the nonzero coefficients (B^T's and A^T's integers, KRON's
    fractions), without multiplying by +-1 (a negative one is subtracted: the same float)."""
    f32 = lambda v: tvm().tirx.const(float(v), "float32")      # noqa: E731
    expr = None
    for coef, term in zip(coefs, terms):
        if coef == 0:
            continue
        mag = abs(coef)
        part = term if mag == 1 else term * f32(mag)
        if expr is None:
            expr = part if coef > 0 else -part
        else:
            expr = expr + part if coef > 0 else expr - part
    return expr


def _select(index, exprs):
    """exprs[index] for a loop variable `index` that the schedule unrolls: a chain of
    if_then_else that folds to one expression per unrolled iteration. Not tir.Select:
    VectorizeLoop (before UnrollLoop) widens a Select's condition to a vector, and a
    Select on a constant vector is never folded, so every stored value carried all six
    expressions through TIR's passes and into LLVM (twice the build time, issue 11)."""
    t = tvm().tirx
    expr = exprs[-1]
    for k in range(len(exprs) - 2, -1, -1):
        expr = t.if_then_else(index == k, exprs[k], expr)
    return expr


def winograd_conv2d(conv: ConvShape, epilogue: Epilogue | None = None):
    """Scheduled PrimFunc (x blocked, transformed weight, *epilogue vectors, *epilogue
    tensors, out blocked); the weight is `transform_weight`'s."""
    te, t = tvm().te, tvm().tirx
    epilogue = epilogue or Epilogue()
    shape = WinogradShape(conv)
    th, tw = shape.tiles_hw
    tiles, ptiles, mr = shape.tiles, shape.padded_tiles, shape.rows
    cb, kb = blocks(conv.c), blocks(conv.oc)
    x = te.placeholder(conv.in_shape, "float32", name="x")
    u = te.placeholder(shape.weight_shape, "float32", name="w")
    vectors, tensors = epilogue.placeholders((kb, BLOCK), conv.out_shape)
    xp = padded_input(x, conv, th * TILE + KERNEL - 1, tw * TILE + KERNEL - 1, BLOCK, False)
    src = x if xp is None else xp

    def tile_origin(p):
        if ptiles > tiles:              # the GEMM's extra rows: any valid tile will do
            p = t.min(p, tiles - 1)
        return p // (th * tw), p // tw % th * TILE, p % tw * TILE

    def rows_bt(c, p, a, s, ci):        # B^T d, one column s of the tile
        n, y, z = tile_origin(p)
        col = [src[n, c, y + r, z + s, ci] for r in range(ALPHA)]
        return _select(a, [_combine(B_T[i], col) for i in range(ALPHA)])
    bt_d = te.compute((cb, ptiles, ALPHA, ALPHA, BLOCK), rows_bt, name="bt_d")
    v = te.compute((ALPHA, ALPHA, cb, ptiles, BLOCK), lambda a, b, c, p, ci: _select(
        b, [_combine(B_T[j], [bt_d[c, p, a, s, ci] for s in range(ALPHA)])
            for j in range(ALPHA)]), name="v")

    rc, rci = te.reduce_axis((0, cb), "rc"), te.reduce_axis((0, BLOCK), "rci")
    m = te.compute((ALPHA, ALPHA, kb, ptiles, BLOCK), lambda a, b, k, p, ko: te.sum(
        v[a, b, rc, p, rci] * u[a, b, k, rc, rci, ko], axis=[rc, rci]), name="gemm")

    def m_at(k, p, a, j, ko):           # M A, one row a of the tile
        return _select(j, [_combine(A_T[i], [m[a, b, k, p, ko] for b in range(ALPHA)])
                           for i in range(TILE)])
    m_a = te.compute((kb, ptiles, ALPHA, TILE, BLOCK), m_at, name="m_a")

    def full_at(n, k, y, z, ko):        # A^T (M A)
        p = n * (th * tw) + y // TILE * tw + z // TILE
        col = [m_a[k, p, a, z % TILE, ko] for a in range(ALPHA)]
        return _select(y % TILE, [_combine(A_T[i], col) for i in range(TILE)])
    full = te.compute((conv.n, kb, th * TILE, tw * TILE, BLOCK), full_at, name="full")
    out = blocked_output(full, conv.out_shape, conv.oc, epilogue, vectors, tensors)

    def schedule(sch):
        work = shape.gemm_macs
        if xp is not None:
            n, c, y, z, ci = sch.get_loops(sch.get_sblock("pad"))
            parallel_if(sch, sch.fuse(n, c, y), work)
            sch.vectorize(ci)
        _schedule_input(sch, work)
        _schedule_gemm(sch, mr, shape.channel_blocks, work)
        _schedule_output(sch, work)

    return scheduled_func([x, u, *vectors, *tensors, out], schedule, "winograd_nchw16c",
                          conv.flops)


def _schedule_input(sch, work: int) -> None:
    """Per (channel block, tile) and row a: row a of B^T d (6 x 16, on the stack), then
    V's row a written to 6 of the 36 GEMM planes; everything unrolled so that the
    coefficient Selects fold. Row by row, not the whole 6x6x16 tile: 2304 bytes would be
    a TVMBackendAllocWorkspace call per tile (see _schedule_gemm); 384 bytes are a stack
    array. Measured (1 thread, CPU time, alternating builds, load 12-22): ResNet-18's
    64 @ 56x56 0.64 -> 0.605 ms, 128 @ 28x28 0.565 -> 0.546 ms."""
    blk = sch.get_sblock("v")
    a, b, c, p, ci = sch.get_loops(blk)
    sch.reorder(c, p, a, b, ci)
    par = sch.fuse(c, p)
    parallel_if(sch, par, work)
    tmp = sch.get_sblock("bt_d")
    sch.compute_at(tmp, a)
    sch.set_scope(tmp, 0, "global")
    for loop in inner_loops(sch, tmp, a)[:-1]:
        sch.unroll(loop)
    sch.vectorize(sch.get_loops(tmp)[-1])
    sch.unroll(a)
    sch.unroll(b)
    sch.vectorize(ci)


def _schedule_gemm(sch, mr: int, kb: int, work: int) -> None:
    """36 GEMMs with an mr x (kb x 16) accumulator tile (see conv.py / dense.py)."""
    blk = sch.get_sblock("gemm")
    a, b, k, p, ko, rc, rci = sch.get_loops(blk)
    po, pi = sch.split(p, [None, mr])
    k, ki = sch.split(k, [None, kb])
    sch.reorder(a, b, k, po, rc, rci, ki, pi, ko)
    par = sch.fuse(a, b, k, po)
    parallel_if(sch, par, work)
    # "global", not "local": TVM gives a CPU kernel's "local" buffers to
    # TVMBackendAllocWorkspace (heap), its "global" ones under 1 KB to the stack, where
    # LLVM keeps the tile in registers. Measured (1 thread, CPU time, alternating builds,
    # load 20-30): ResNet-18's 64 @ 56x56 0.73 -> 0.645 ms, 128 @ 28x28 0.61 -> 0.565 ms;
    # an 8-row tile (256 @ 14x14: 8 x 2 x 16 floats) is 1 KB and stays on the heap.
    acc = sch.cache_write(blk, 0, "global")
    sch.reverse_compute_at(acc, par)
    sch.vectorize(ko)
    sch.unroll(pi)
    sch.unroll(ki)
    init = sch.decompose_reduction(blk, rc)
    vectorize_inner(sch, init, par)
    vectorize_inner(sch, acc, par)


def _schedule_output(sch, work: int) -> None:
    """Per (image, out block, tile row, tile): M A in a local 6x4x16 tile, then A^T of it
    through the epilogue straight into the output (ragged edges are predicated)."""
    sch.compute_inline(sch.get_sblock("full"))
    out = sch.get_sblock("out")
    n, k, y, z, ko = sch.get_loops(out)
    ty, i = sch.split(y, [None, TILE])
    tx, j = sch.split(z, [None, TILE])
    sch.reorder(n, k, ty, tx, i, j, ko)
    par = sch.fuse(n, k, ty)
    parallel_if(sch, par, work)
    tmp = sch.get_sblock("m_a")
    sch.compute_at(tmp, tx)
    sch.set_scope(tmp, 0, "local")
    loops = inner_loops(sch, tmp, tx)
    for loop in loops[:-1]:
        sch.unroll(loop)
    sch.vectorize(loops[-1])
    sch.unroll(i)
    sch.unroll(j)
    sch.vectorize(ko)
