"""The Relax pipeline for llvm targets: TVM's CPU pipeline plus the generic rule.

TVM's default CPU pipeline legalizes, fuses and lowers, but schedules nothing. The
generic rule runs right after FuseTIR, so it sees the fused functions (one parallel
loop per fused group, not one per op); the hand-scheduled rule functions carry
"tirx.is_scheduled" and pass through untouched. fast_math_pass (before legalization)
gives exp/erf/tanh/sigmoid/softmax vectorizable polynomial forms.
"""
from __future__ import annotations

from typing import Any

from .._tvm import tvm
from ..fusion_control import limit_fusion, record_kernels
from .fast_math_pass import fast_math_pass
from .generic import GenericRule


def cpu_pipeline(target: Any, *, fuse_transpose: bool = True, fuse_reduce: bool = True,
                 kernels: list | None = None, before_finalize: tuple = ()):
    """`fuse_transpose`/`fuse_reduce` (trace's graph_opt_config) limit TVM's fusion;
    `kernels` collects the names of the fused TIR functions; `before_finalize`: passes
    run on the lowered calls before memory planning (donate.py's)."""
    t = tvm()
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    from tvm.s_tir.dlight import ApplyDefaultSchedule
    rx = t.relax

    @t.transform.module_pass(opt_level=0, name="MegtraceCpuPipeline")
    def _pipeline(mod, _ctx):
        with target:
            legalize = [fast_math_pass(), rx.transform.LegalizeOps(),
                        rx.transform.AnnotateTIROpPattern(),
                        limit_fusion(fuse_transpose, fuse_reduce), rx.transform.FoldConstant(),
                        rx.transform.FuseOps(), rx.transform.FuseTIR(),
                        record_kernels(kernels if kernels is not None else [])]
            passes = (cpu.library_dispatch_passes(target) + legalize
                      + [ApplyDefaultSchedule(GenericRule())]
                      + cpu.dataflow_lower_passes(target) + list(before_finalize)
                      + cpu.finalize_passes(target))
            return t.transform.Sequential(passes)(mod)
    return _pipeline
