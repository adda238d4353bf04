"""Dense / matmul with a constant weight: B packed as (N/nr, K, nr), register tile mr x nr.

GEMM: an 8 x 32 tile is 16 zmm accumulators (AVX2's tiles: primfunc.gemm_tile); each k
step loads two zmm of B and broadcasts 8 values of A (cpu-schedules.md: 98 % of peak;
48- or 96-wide tiles spill).
GEMV (one row): reading B is the whole cost, so the rule only cuts N into chunks of
`GEMV_NR` columns, one per parallel task, and streams K. cpu-schedules.md found 40
columns best; on this VM (TVM 0.27, 2 threads) 64 is: 1x512x1000 in 12.3 us (83
GFLOP/s) against 17.2 us for 40 and 12.9 us for 32, and 1x768x3072 91 vs 62 GFLOP/s.
On a Zen 4 core (AVX-512 double-pumped: one 16-lane FMA per cycle, 116.9 GFLOP/s
measured by bench/fma_peak.py) the encoder's GEMMs (128 x 768 x 768/2304/3072, 128 x
3072 x 768) run at 104-110 GFLOP/s in the model, 1 thread; the inner loop is 64 FMAs,
32 broadcasts and 8 loads per 4 k. Tried there on the same shapes alone (huge-page
weights, CPU time, load 10-15), none better: k blocked by 128/192/256 (B's sub-panel
in L1) equal; 4 x 64 tiles equal; 12 x 32 -3 % (-22 % at k 3072); a prefetch of the
next column panel into L2 (weight_prefetch.py's scheme) -3 to -6 %; 8 x 48 spills (16
GFLOP/s). ONNX Runtime and OpenVINO are at the same FMA ceiling there.
"""
from __future__ import annotations

from dataclasses import dataclass

from .._tvm import tvm
from .epilogue import Epilogue
from .layout import ceil_div
from .primfunc import gemm_tile, schedule_register_tile, scheduled_func

GEMV_NR = 64


@dataclass(frozen=True)
class DenseShape:
    """out (m, n) = a (m, k) @ b (k, n)."""

    m: int
    k: int
    n: int

    @property
    def tile(self) -> tuple[int, int]:
        if self.m == 1:
            return 1, next(nr for nr in (GEMV_NR, 32, 16) if self.n >= 2 * nr or nr == 16)
        return gemm_tile(self.m, self.n)

    @property
    def weight_shape(self) -> tuple[int, int, int]:
        nr = self.tile[1]
        return (ceil_div(self.n, nr), self.k, nr)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def dense_packed(shape: DenseShape, epilogue: Epilogue | None = None):
    """Scheduled PrimFunc (a, packed b, *epilogue vectors (n,), *epilogue tensors (m, n),
    out (m, n))."""
    te, t = tvm().te, tvm().tirx
    epilogue = epilogue or Epilogue()
    (m, k, n), (mr, nr) = (shape.m, shape.k, shape.n), shape.tile
    mp, np_ = ceil_div(m, mr) * mr, ceil_div(n, nr) * nr
    a = te.placeholder((m, k), "float32", name="a")
    b = te.placeholder(shape.weight_shape, "float32", name="b")
    vectors, tensors = epilogue.placeholders((n,), (m, n))
    r = te.reduce_axis((0, k), "k")
    if mp == m:
        a_at = lambda i, kk: a[i, kk]                                    # noqa: E731
    else:   # rows past m read zeros (their results are never written)
        zero = t.const(0.0, "float32")
        a_at = lambda i, kk: te.if_then_else(i < m, a[t.min(i, m - 1), kk], zero)  # noqa: E731
    full = te.compute((mp, np_), lambda i, j: te.sum(a_at(i, r) * b[j // nr, r, j % nr],
                                                     axis=r), name="dense")
    out = te.compute((m, n), lambda i, j: epilogue.apply(
        full[i, j], lambda q: vectors[q][j], lambda q: tensors[q][i, j]), name="out")
    ku = next(u for u in (4, 2, 1) if k % u == 0)

    def schedule(sch):
        blk = sch.get_sblock("dense")
        i, j, kk = sch.get_loops(blk)
        schedule_register_tile(sch, blk, [], i, j, kk, mr, nr, ku, shape.flops)

    return scheduled_func([a, b, *vectors, *tensors, out], schedule, "dense_packed",
                          shape.flops)
