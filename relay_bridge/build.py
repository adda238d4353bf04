"""Build a Relax module for a target and run it with the Relax VM."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from megtrace.errors import CompileError, MegtraceError
from megtrace.ir import Graph

from ._tvm import relax, tvm
from .compiled import CompiledGraph, InterpretedGraph
from . import cpu as cpu_rules
from .fusion_control import limit_fusion, record_kernels
from .lower import to_relax
from .targets import resolve, uses_cpu_rules
from .tuning import compile_tuned


def has_empty_values(graph: Graph) -> bool:
    """Whether any input, constant or intermediate value of `graph` has 0 elements."""
    return any(v.type.size == 0 for v in graph.inputs) or \
        any(v.type.size == 0 for v in graph.consts) or \
        any(v.type.size == 0 for n in graph.nodes for v in n.outputs)


def has_unlowered_ops(graph: Graph) -> bool:
    """Whether `graph` uses an op Relax cannot express (matinv, svd: `OpDef.interpreted`):
    such graphs run on the NumPy interpreter, like graphs with 0-size values."""
    return any(n.op.interpreted for n in graph.nodes)


@dataclass(frozen=True)
class BuildOptions:
    """How much a build may rewrite (trace's opt_level and graph_opt_config):

    - opt_level 0: legalize only, one unscheduled kernel per op;
    - 1: + constant folding and TVM's operator fusion;
    - 2 (default): + megtrace's CPU rules on llvm targets (blocked layouts, hand schedules,
      threads and vectors for every kernel);
    - 3: 2 + MetaSchedule records from `tuning_dir` when given.
    fuse_transpose / fuse_reduce: whether transposes and reductions may join fused kernels.
    """

    opt_level: int = 2
    fuse_transpose: bool = True
    fuse_reduce: bool = True
    tuning_dir: str | None = None


def compile_graph(graph: Graph, target: Any = None, *, rules: bool | None = None,
                  options: BuildOptions | None = None) -> CompiledGraph:
    """Lower `graph` to Relax and build it.

    On llvm targets the CPU rules (megtrace.relay_bridge.cpu: blocked-layout conv, packed dense,
    threads and vectors everywhere) are used unless `rules=False`, the environment has
    MEGTRACE_CPU_RULES=0 or `options.opt_level` < 2; other targets use TVM's default
    pipeline for their kind. If a build with the rules fails, the graph is built again on
    the default path.
    """
    tgt = resolve(target)
    graph = graph.without_shape_inputs()     # shape arithmetic never reaches kernels
    options = options or BuildOptions()
    if has_empty_values(graph) or has_unlowered_ops(graph):
        return InterpretedGraph(graph, tgt)
    if not 0 <= options.opt_level <= 3:
        raise ValueError(f"opt_level must be 0..3; got {options.opt_level}")
    if options.opt_level < 2:
        return _build_plain(graph, tgt, options)
    if options.opt_level == 3 and options.tuning_dir is not None and tgt.kind.name == "llvm":
        return compile_tuned(graph, tgt, options.tuning_dir)
    if uses_cpu_rules(tgt, rules):
        try:
            return _build_with_rules(graph, tgt, options)
        except Exception as e:   # a bug in a rule must not stop a graph TVM can build
            if isinstance(e, MegtraceError) and not isinstance(e, CompileError):
                raise            # the graph's own error (unsupported op, bad lowering)
            first = (str(e).strip().splitlines() or [""])[0]
            logging.getLogger(__name__).warning(
                "CPU rules failed to build the graph (%s: %s); using the default path",
                type(e).__name__, first)
    if tgt.kind.name == "llvm" and not (options.fuse_transpose and options.fuse_reduce):
        return _build_plain(graph, tgt, options)
    start = time.perf_counter()
    mod = to_relax(graph)
    ex = _build(tgt, mod, relax().get_default_pipeline(tgt))
    return CompiledGraph(graph, tgt, ex, time.perf_counter() - start)


def _build_plain(graph: Graph, tgt: Any, options: BuildOptions) -> CompiledGraph:
    """opt_level 0/1 (and fusion limits without rules): TVM's CPU passes, chosen by level."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    t, rx = tvm(), relax()
    kernels: list[str] = []
    if options.opt_level == 0:
        middle = [rx.transform.LegalizeOps(), record_kernels(kernels)]
    else:
        middle = [rx.transform.LegalizeOps(), rx.transform.AnnotateTIROpPattern(),
                  limit_fusion(options.fuse_transpose, options.fuse_reduce),
                  rx.transform.FoldConstant(), rx.transform.FuseOps(), rx.transform.FuseTIR(),
                  record_kernels(kernels)]

    @t.transform.module_pass(opt_level=0, name="MegtraceLeveledPipeline")
    def pipeline(mod, _ctx):
        with tgt:
            return t.transform.Sequential(cpu.library_dispatch_passes(tgt) + middle
                                          + cpu.dataflow_lower_passes(tgt)
                                          + cpu.finalize_passes(tgt))(mod)

    start = time.perf_counter()
    ex = _build(tgt, to_relax(graph), pipeline)
    return CompiledGraph(graph, tgt, ex, time.perf_counter() - start, [],
                         "plain" if options.opt_level == 0 else "fused", kernels)


def _build_with_rules(graph: Graph, tgt: Any, options: BuildOptions | None = None
                      ) -> CompiledGraph:
    options = options or BuildOptions()
    start = time.perf_counter()
    mod, used = cpu_rules.to_relax_cpu(graph)
    kernels: list[str] = []
    pipeline = cpu_rules.cpu_pipeline(tgt, fuse_transpose=options.fuse_transpose,
                                      fuse_reduce=options.fuse_reduce, kernels=kernels)
    ex = _build(tgt, mod, pipeline)
    return CompiledGraph(graph, tgt, ex, time.perf_counter() - start, used, "cpu-rules",
                         kernels)


def _build(tgt: Any, mod: Any, pipeline: Any) -> Any:
    rx = relax()
    try:
        with tgt, tvm().transform.PassContext(opt_level=3):
            return rx.build(mod, target=tgt, relax_pipeline=pipeline)
    except Exception as e:
        raise CompileError(f"TVM failed to build the graph for {tgt}: {e}") from e


def run_graph(graph: Graph, inputs: Sequence[np.ndarray], target: Any = None) -> list[np.ndarray]:
    return compile_graph(graph, target)(*inputs)
