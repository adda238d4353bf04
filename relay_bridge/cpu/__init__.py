"""Rule-based CPU schedules (no tuning) for llvm targets.

TVM 0.27 ships no CPU schedules: its default pipeline runs every kernel as naive
single-threaded loops. This package lowers a megtrace Graph with hand-written s_tir
schedules instead (see shared/reference/cpu-schedules.md, beside the checkout, for the
measurements behind them):

- plan.py      which nodes a rule takes and which elementwise ops fuse into it
- lower.py     Graph -> Relax, keeping NCHW16c between blocked ops
- primfunc.py  TE -> scheduled PrimFunc, marked so that fusion leaves it alone
- conv.py      conv2d on NCHW16c, 14x16 register tile
- weight_prefetch.py  channels-outermost convs prefetch the next channel tile's weights
- depthwise.py depthwise conv2d on NCHW16c, 4x16 tile
- pointwise_depthwise.py  an expanding 1x1 conv + the 3x3 depthwise it feeds, by row strips
- dense.py     matmul with a constant weight, packed B, 8x32 tile (GEMV: 64-wide chunks)
- amx.py        float32 dense GEMMs as three bf16 AMX tile products (hi/lo split;
               hosts with AMX, MEGTRACE_AMX=0: dense.py); its tile program is shared
               and runs emulated in plain TIR for tests on hosts without AMX
- amx_conv.py  conv2d on NCHW16c as AMX tile products over phase-split flat inputs
               (no im2col); opt-in until timed on an AMX host: MEGTRACE_AMX_CONV=1 (all
               it covers) or =direct (those Winograd does not take)
- matmul.py    batched matmul of two runtime tensors (attention), same tile
- attention.py softmax(q @ k^T) @ v as one kernel per head and row block
               (MEGTRACE_FUSED_ATTENTION=0: three kernels)
- views.py     reshape / transpose / slice chains read as strides (no copy kernels)
- huge_pages.py  packed dense / conv weights >= 2 MB in transparent huge pages
- pool.py      pooling and global reductions on NCHW16c
- epilogue.py  bias / batch norm / activation / residual fused into the kernels
- layout.py    NCHW16c and weight packing
- generic.py   threads + vectors for every other PrimFunc, after fusion
- fast_math.py vectorizable float32 exp/erf/tanh/sigmoid (MEGTRACE_FAST_MATH=0: libm)
- fast_math_pass.py  gives them to generic kernels (softmax, GELU, ...) before legalization
- rowwise.py   softmax / layer_norm rows reduced as 16 lane partials (vectorized)
- pipeline.py  TVM's CPU pipeline with the generic rule inserted
"""
from .lower import to_relax_cpu
from .pipeline import cpu_pipeline

__all__ = ["cpu_pipeline", "to_relax_cpu"]
