"""The Relax pass lists that tuning and tuned builds must share.

MetaSchedule records are keyed by the structural hash of each fused PrimFunc, so the
module tuning extracts tasks from and the module a tuned build looks records up in
must come out of the very same lowering and fusion passes; both take them from here.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from ._tvm import relax, tvm
from .cpu import to_relax_cpu
from .cpu.batch_split import split_batch
from .cpu.common_subexpr import merge_common_subexprs
from .cpu.dead_taps import crop_dead_taps, split_positions
from .cpu.fast_math_pass import fast_math_pass
from .cpu.transposed_conv import as_subpixel_convs
from .cpu.zero_pad import concat_zeros_as_pad
from .fold_conv_bn import fold_batchnorm_into_conv
from .lower import to_relax
from .targets import has_amx

log = logging.getLogger(__name__)


def lower_graph(graph: Any, target: Any, base: str,
                on_kernel: Callable[[str, Any], None] | None = None
                ) -> tuple[Any, list[str]]:
    """(IRModule, rule kernels used): base "rules" is the CPU rules' lowering (hand
    kernels for conv/dense/pool), "default" the plain one (every kernel tunable);
    `on_kernel(name, func)`: told of each TIR function the rules' lowering adds."""
    graph = graph.without_shape_inputs()     # shape arithmetic never reaches kernels
    graph = merge_common_subexprs(graph)     # a value computed twice is computed once
    graph = as_subpixel_convs(graph)         # transposed convs as (rule-run) convs
    graph = crop_dead_taps(graph)            # no taps or outputs that meet only padding
    graph = split_positions(graph)           # 2x2 maps: each output its own taps
    graph = concat_zeros_as_pad(graph)       # zeros from a bounds check, not an array
    if base == "rules":
        # an inference BatchNorm's scale in the conv weights: the kernel's epilogue adds
        # one shift instead of subtract, multiply, add
        graph = fold_batchnorm_into_conv(graph)
        # early layers image by image at batch > 1 (cpu/batch_split.py); the rules size
        # their register tiles for `target` (cpu/primfunc.vector_lanes)
        with target:
            return to_relax_cpu(split_batch(graph), amx=has_amx(target), on_kernel=on_kernel)
    return to_relax(graph), []


def fusion_passes(target: Any) -> list:
    """Legalize and fuse, as TVM's CPU pipeline does before it lowers dataflow, with the
    untuned build's vectorizable exp/erf/tanh/softmax forms (cpu/fast_math_pass.py) first,
    so a tuned kernel and the rules' build compute the same expressions."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    return cpu.library_dispatch_passes(target) + [fast_math_pass()] + \
        cpu.legalize_passes(target)


def fuse(mod: Any, target: Any) -> Any:
    """The module whose PrimFuncs are MetaSchedule's tasks."""
    with target, tvm().transform.PassContext(opt_level=3):
        return tvm().transform.Sequential(fusion_passes(target))(mod)


def generic_rule() -> Any | None:
    """megtrace.relay_bridge.cpu's rule for the kernels nothing else schedules (None if absent)."""
    try:
        from .cpu.generic import GenericRule
    except ImportError as e:           # the rules are optional for a tuned build
        log.info("no generic CPU rule (%s); untuned kernels stay unscheduled", e)
        return None
    return GenericRule()


def tuned_pipeline(target: Any) -> Any:
    """Fusion, the records of the current MetaSchedule database, the generic rule for
    every kernel without a record, then TVM's CPU lowering. Run it under `with db:`."""
    t = tvm()
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    from tvm.s_tir.dlight import ApplyDefaultSchedule

    @t.transform.module_pass(opt_level=0, name="MegtraceTunedPipeline")
    def _pipeline(mod, _ctx):
        with target:      # MetaScheduleApplyDatabase reads Target.current() when built
            rule = generic_rule()
            passes = (fusion_passes(target)
                      + [relax().transform.MetaScheduleApplyDatabase(enable_warning=False)]
                      + ([ApplyDefaultSchedule(rule)] if rule is not None else [])
                      + cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target))
            return t.transform.Sequential(passes)(mod)
    return _pipeline
