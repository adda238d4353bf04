"""The TIR lowering of the CPU rules' kernels: TVM's, less the passes with nothing to do.

`tvm.tirx.build` runs TVM 0.27's "s_tir" pipeline (tvm/s_tir/pipeline.py) on every
kernel: 47 passes, ~25% of a rule kernel's build (issue 11: first call). Seventeen of
them only rewrite what a kernel for an llvm CPU never has: GPU thread bindings and
cross-thread reductions, shared/warp memory and its synchronisation, virtual threads,
tensor-core (MMA) layouts and fragments, PTX copies, Hexagon VTCM. RemoveNoOp also
changes none of the rules' kernels (they store no `x = x` and leave no empty loop);
with the others it was 17% of the TIR passes' CPU over ResNet-18's and MobileNetV2's
kernels. "megtrace_cpu" is the s_tir list without those, the rest in TVM's order with
TVM's config switches; tests/perf/test_cpu_tir_pipeline.py checks that it lowers the
rules' kernels to the same TIR as TVM's pipeline, less the argument checks below. Only
the rules' builds use it: TVM's default and tuned paths keep TVM's pipeline.

It also drops the argument checks MakePackedAPI writes into each kernel's entry (an
assert per argument's type, rank, dtype, device, shape and stride, each with its error
message: ~1100 of the ~1500 instructions of a conv kernel's entry, 0.7 of ResNet-18's
2.9 s of kernel build CPU), as TVM's `tirx.disable_assert` does. The kernels of a
Relax executable are called only by its VM, with buffers it allocated from the module's
static shapes or received through `main`, whose arguments it checks itself (shape,
dtype: `vm.builtin.check_tensor_info`/`match_shape`); the kernels have no asserts of
their own (tests/perf/test_cpu_tir_pipeline.py), and their code is unchanged.

And stack_tiles.py's pass, after StorageRewrite: 1 KB register tiles stay on the stack.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from ._tvm import tvm
from .stack_tiles import stack_tiles

NAME = "megtrace_cpu"


def _passes(config: Any) -> list:
    t = tvm()
    s, x = t.s_tir.transform, t.tirx.transform
    passes = [
        s.CanonicalizeLoop(), s.LowerInitBlock(), s.PlanAndUpdateBufferAllocationLocation(),
        s.ConvertBlocksToOpaque(), s.CompactBufferAllocation(), s.LowerMatchBuffer(),
        s.StmtSimplify(), s.AnnotateIrregularLoop(), s.InjectSoftwarePipeline(),
        s.LowerOpaqueBlock(), x.FlattenBuffer(), x.BF16ComputeLegalize(),
        x.NarrowDataType(32), s.LoopPartition(),
        x.VectorizeLoop(not bool(config.get("tirx.disable_vectorize", False))),
        s.InjectDoubleBuffer(),
    ]
    if not bool(config.get("tirx.disable_storage_rewrite", False)):
        passes.append(x.StorageRewrite())
    passes += [s.HoistIfThenElse(), x.UnrollLoop(), s.RenormalizeSplitPattern(),
               x.StmtSimplify(), s.RewriteUnsafeSelect()]
    if bool(config.get("tirx.instrument_bound_checkers", False)):
        passes.append(s.InstrumentBoundCheckers())
    if not bool(config.get("tirx.disable_cse_tir", False)):
        passes.append(x.CommonSubexprElim())
    if bool(config.get("tirx.instrument_lwp", False)):
        passes.append(s.InstrumentProfileIntrinsics())
    return passes + [stack_tiles(), x.FP8ComputeLegalize(), x.VerifyMemory(),
                     x.AnnotateEntryFunc(),
                     x.SplitHostDevice(), x.MakePackedAPI(), x.SkipAssert(),
                     x.FP8StorageLegalize(), x.BF16StorageLegalize()]


def _factory() -> tuple:
    """(lowering, host finalization, device finalization), as TVM's pipeline factories
    return them; the finalization passes are s_tir's."""
    t = tvm()
    s_tir = t.s_tir.pipeline

    @t.transform.module_pass(opt_level=0, name="MegtraceCpuTirPipeline")
    def _pipeline(mod: Any, _ctx: Any) -> Any:
        config = t.transform.PassContext.current().config
        return t.ir.transform.Sequential(_passes(config))(mod)
    return _pipeline, s_tir.finalize_host_passes, s_tir.finalize_device_passes


@lru_cache(maxsize=None)
def cpu_tir_pipeline() -> str:
    """The pipeline's name for tvm.tirx.build / relax.build (registered on first use)."""
    tvm().tirx.register_tir_pipeline(NAME, _factory)
    return NAME
