"""Batched matmul of two runtime tensors (attention's q @ k^T and p @ v).

The same register tile as dense.py (primfunc.gemm_tile). B cannot be packed at build
time, so when its rows are not contiguous along N (transpose_b, or N not a multiple of
the tile) the kernel first copies it to (batch, N/nr, K, nr), which costs K*N per batch
against M*N*K multiply-adds. Leading axes broadcast as in megtrace's matmul.
"""
from __future__ import annotations

from dataclasses import dataclass

from .._tvm import tvm
from .epilogue import Epilogue
from .layout import ceil_div
from .primfunc import gemm_tile, parallel_if, schedule_register_tile, scheduled_func


@dataclass(frozen=True)
class MatmulShape:
    """a (*a_batch, m, k) [or (..., k, m) with transpose_a] @ b (*b_batch, k, n) [or
    (..., n, k) with transpose_b]."""

    a: tuple[int, ...]
    b: tuple[int, ...]
    transpose_a: bool = False
    transpose_b: bool = False

    @property
    def mkn(self) -> tuple[int, int, int]:
        m, k = self.a[-2:][::-1] if self.transpose_a else self.a[-2:]
        n = self.b[-2] if self.transpose_b else self.b[-1]
        return m, k, n

    @property
    def batch(self) -> tuple[int, ...]:
        nd = max(len(self.a), len(self.b)) - 2
        pa = (1,) * (nd - len(self.a) + 2) + self.a[:-2]
        pb = (1,) * (nd - len(self.b) + 2) + self.b[:-2]
        return tuple(max(x, y) for x, y in zip(pa, pb))

    @property
    def out(self) -> tuple[int, ...]:
        m, _, n = self.mkn
        return self.batch + (m, n)

    @property
    def tile(self) -> tuple[int, int]:
        m, _, n = self.mkn
        return gemm_tile(m, n)

    @property
    def flops(self) -> int:
        m, k, n = self.mkn
        total = 2 * m * k * n
        for d in self.batch:
            total *= d
        return total


def _batch_index(shape: tuple[int, ...], batch: tuple, nd: int) -> list:
    """Indices into an operand's leading axes for output batch indices (broadcast)."""
    own = shape[:-2]
    lead = batch[nd - len(own):] if own else ()
    return [0 if d == 1 else v for d, v in zip(own, lead)]


def batch_matmul(shape: MatmulShape, epilogue: Epilogue | None = None):
    """Scheduled PrimFunc (a, b, *epilogue vectors (n,), *epilogue tensors (out shape),
    out)."""
    te, t = tvm().te, tvm().tirx
    epilogue = epilogue or Epilogue()
    (m, k, n), (mr, nr) = shape.mkn, shape.tile
    mp, np_ = ceil_div(m, mr) * mr, ceil_div(n, nr) * nr
    nd = len(shape.batch)
    a = te.placeholder(shape.a, "float32", name="a")
    b = te.placeholder(shape.b, "float32", name="b")
    vectors, tensors = epilogue.placeholders((n,), shape.out)
    zero = t.const(0.0, "float32")

    def b_at(bi, kk, j):
        idx = _batch_index(shape.b, bi, nd)
        return b[(*idx, j, kk)] if shape.transpose_b else b[(*idx, kk, j)]

    packed = bool(shape.transpose_b or n % nr)
    if packed:
        bp = te.compute(shape.b[:-2] + (np_ // nr, k, nr), lambda *i: te.if_then_else(
            i[-3] * nr + i[-1] < n, _b_own(b, shape, i, nr, n), zero), name="pack_b")

    def a_at(bi, i, kk):
        idx = _batch_index(shape.a, bi, nd)
        ii = t.min(i, m - 1) if mp != m else i
        value = a[(*idx, kk, ii)] if shape.transpose_a else a[(*idx, ii, kk)]
        return te.if_then_else(i < m, value, zero) if mp != m else value

    r = te.reduce_axis((0, k), "k")

    def mac(*idx):
        bi, i, j = idx[:-2], idx[-2], idx[-1]
        if packed:
            bidx = _batch_index(shape.b, bi, nd)
            bval = bp[(*bidx, j // nr, r, j % nr)]
        else:
            bval = b_at(bi, r, j)
        return te.sum(a_at(bi, i, r) * bval, axis=r)
    full = te.compute(shape.batch + (mp, np_), mac, name="matmul")
    out = te.compute(shape.out, lambda *i: epilogue.apply(
        full[i], lambda q: vectors[q][i[-1]], lambda q: tensors[q][i]), name="out")
    ku = next(u for u in (4, 2, 1) if k % u == 0)

    def schedule(sch):
        if packed:
            loops = sch.get_loops(sch.get_sblock("pack_b"))
            outer = loops[:-2]
            parallel_if(sch, sch.fuse(*outer) if len(outer) > 1 else outer[0], shape.flops // 2)
            sch.vectorize(loops[-1])
        blk = sch.get_sblock("matmul")
        loops = sch.get_loops(blk)
        batch, (i, j, kk) = loops[:-3], loops[-3:]
        schedule_register_tile(sch, blk, list(batch), i, j, kk, mr, nr, ku, shape.flops)

    return scheduled_func([a, b, *vectors, *tensors, out], schedule, "batch_matmul",
                          shape.flops)


def _b_own(b, shape: MatmulShape, i: tuple, nr: int, n: int):
    """pack_b's value at its own index i = (*b_batch, jo, k, ji)."""
    t = tvm().tirx
    *own, jo, kk, ji = i
    j = t.min(jo * nr + ji, n - 1)
    return b[(*own, j, kk)] if shape.transpose_b else b[(*own, kk, j)]
