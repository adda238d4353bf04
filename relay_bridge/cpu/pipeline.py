"""The Relax pipeline for llvm targets: TVM's CPU pipeline plus the generic rule.

TVM's default CPU pipeline legalizes, fuses and lowers, but schedules nothing. The
generic rule runs right after FuseTIR, so it sees the fused functions (one parallel
loop per fused group, not one per op); the hand-scheduled rule functions carry
"tirx.is_scheduled" and pass through untouched.
"""
from __future__ import annotations

from typing import Any

from .._tvm import tvm
from .generic import GenericRule


def cpu_pipeline(target: Any):
    t = tvm()
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    from tvm.s_tir.dlight import ApplyDefaultSchedule

    @t.transform.module_pass(opt_level=0, name="MegtraceCpuPipeline")
    def _pipeline(mod, _ctx):
        with target:
            passes = (cpu.library_dispatch_passes(target) + cpu.legalize_passes(target)
                      + [ApplyDefaultSchedule(GenericRule())]
                      + cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target))
            return t.transform.Sequential(passes)(mod)
    return _pipeline
