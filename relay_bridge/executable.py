"""Build a Graph into a TVM executable for any target, without running it: the one
place that decides how a graph is built.

`build_executable` owns the policy every build follows (compile_graph, export, tune's
comparison, the compile cache): the trace's opt_level picks TVM's passes (0: legalize
only, 1: + constant folding and fusion, 2: + megtrace's CPU rules on llvm targets, 3:
+ MetaSchedule records from a tuning_dir); if a build with the CPU rules fails the
graph is built again on TVM's default path; other targets use TVM's default pipeline
for their kind. `compile_graph` wraps the result in a VM, which only works on the
machine the target describes; exporting and cross-compiling (aarch64, CUDA without a
GPU) need the executable alone.
"""
from __future__ import annotations

import logging
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any

from megtrace.errors import CompileError, MegtraceError
from megtrace.ir import Graph

from ._tvm import relax, tvm
from .cpu_tir_pipeline import cpu_tir_pipeline
from .donate import donate_pass
from .early_build import EarlyBuilds, enabled as early_build_enabled
from megtrace.gc_pause import collector_paused
from .parallel_build import build_context, build_module, build_threads, parallel_build
from .pipelines import lower_graph, tuned_pipeline
from .targets import resolve

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildOptions:
    """How much a build may rewrite (trace's opt_level and graph_opt_config):

    - opt_level 0: legalize only, one unscheduled kernel per op;
    - 1: + constant folding and TVM's operator fusion;
    - 2 (default): + megtrace's CPU rules on llvm targets (blocked layouts, hand schedules,
      threads and vectors for every kernel);
    - 3: 2 + MetaSchedule records from `tuning_dir` when given.
    fuse_transpose / fuse_reduce: whether transposes and reductions may join fused kernels.
    donate: returned kernel outputs may be written over inputs that die there (donate.py;
    the CPU rules' build only; CompiledGraph then copies those inputs before each run).
    """

    opt_level: int = 2
    fuse_transpose: bool = True
    fuse_reduce: bool = True
    tuning_dir: str | None = None
    donate: bool = False


@dataclass
class Built:
    """An executable and how it was made."""

    executable: Any
    target: Any
    pipeline: str                      # "cpu-rules", "default", "fused", "plain" or "tuned"
    seconds: float
    rules: list[str] = field(default_factory=list)    # CPU rule kernels used (llvm only)
    kernels: list[str] = field(default_factory=list)  # TIR functions after fusion
    cached: bool = False       # loaded from the compile cache (a library, not an Executable)


def is_host(target: Any) -> bool:
    """Whether code for `target` runs on this machine's CPU."""
    if target.kind.name != "llvm":
        return False
    triple = str(target.attrs.get("mtriple", "") or "")
    return not triple or triple.split("-")[0] == platform.machine()


def uses_cpu_rules(target: Any, rules: bool | None = None) -> bool:
    """Whether a build takes the CPU rules for this (resolved) target: llvm only, unless
    `rules` is False or MEGTRACE_CPU_RULES is 0/false/off."""
    if rules is None:
        rules = os.environ.get("MEGTRACE_CPU_RULES", "1").lower() not in ("0", "false", "off")
    return bool(rules) and target.kind.name == "llvm"


def rules_wanted(target: Any, rules: bool | None) -> bool:
    """The default build's choice (llvm, unless rules=False or MEGTRACE_CPU_RULES=0)."""
    return uses_cpu_rules(target, rules)


def build_executable(graph: Graph, target: Any = None, *, rules: bool | None = None,
                     options: BuildOptions | None = None) -> Built:
    """The executable for `graph` on `target` as `options` (default: opt_level 2) ask."""
    tgt = resolve(target)
    options = options or BuildOptions()
    if not 0 <= options.opt_level <= 3:
        raise ValueError(f"opt_level must be 0..3; got {options.opt_level}")
    if options.opt_level == 3 and options.tuning_dir is not None and tgt.kind.name == "llvm":
        from .tuning import tuned_executable
        return tuned_executable(graph, tgt, options.tuning_dir)   # may tune for minutes
    with collector_paused():         # a build of seconds: no gen-2 passes over the heap
        return _untuned_build(graph, tgt, rules, options)


def _untuned_build(graph: Graph, tgt: Any, rules: bool | None, options: BuildOptions) -> Built:
    if options.opt_level < 2:
        return _build_leveled(graph, tgt, options)
    if uses_cpu_rules(tgt, rules):
        try:
            return _build_with_rules(graph, tgt, options)
        except Exception as e:   # a bug in a rule must not stop a graph TVM can build
            if isinstance(e, MegtraceError) and not isinstance(e, CompileError):
                raise            # the graph's own error (unsupported op, bad lowering)
            first = (str(e).strip().splitlines() or [""])[0]
            log.warning("CPU rules failed to build the graph (%s: %s); using the default "
                        "path", type(e).__name__, first)
    if tgt.kind.name == "llvm" and not (options.fuse_transpose and options.fuse_reduce):
        return _build_leveled(graph, tgt, options)
    start = time.perf_counter()
    mod, _ = lower_graph(graph, tgt, "default")
    ex = relax_build(tgt, mod, relax().get_default_pipeline(tgt))
    return Built(ex, tgt, "default", time.perf_counter() - start)


def _build_with_rules(graph: Graph, tgt: Any, options: BuildOptions) -> Built:
    from .cpu import cpu_pipeline
    start = time.perf_counter()
    early = _early_builds(tgt, cpu_tir_pipeline())
    try:
        mod, used = lower_graph(graph, tgt, "rules", on_kernel=early.offer if early else None)
        kernels: list[str] = []
        extra = (donate_pass(),) if options.donate else ()
        ex = relax_build(tgt, mod, cpu_pipeline(tgt, fuse_transpose=options.fuse_transpose,
                                                fuse_reduce=options.fuse_reduce,
                                                kernels=kernels, before_finalize=extra),
                         cpu_tir_pipeline(), early)
    finally:
        if early is not None:
            early.close()
    return Built(ex, tgt, "cpu-rules", time.perf_counter() - start, used, kernels)


def _early_builds(tgt: Any, tir_pipeline: str) -> EarlyBuilds | None:
    """Kernels built while the lowering goes on (early_build.py): for this machine's CPU
    (a first call waits for them) when the kernels build on several threads."""
    if not (early_build_enabled() and is_host(tgt) and build_threads() > 1):
        return None
    context = build_context()
    return EarlyBuilds(lambda functions: build_module(functions, tgt, context, True,
                                                      tir_pipeline))


def _build_leveled(graph: Graph, tgt: Any, options: BuildOptions) -> Built:
    """opt_level 0/1 (and fusion limits without rules): TVM's CPU passes, chosen by level."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    from .fusion_control import limit_fusion, record_kernels
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
    mod, _ = lower_graph(graph, tgt, "default")
    ex = relax_build(tgt, mod, pipeline)
    return Built(ex, tgt, "plain" if options.opt_level == 0 else "fused",
                 time.perf_counter() - start, [], kernels)


def build_tuned_executable(graph: Graph, target: Any, database: Any, base: str) -> Built:
    """Build with the records of `database` (tuned on the `base` lowering)."""
    tgt = resolve(target)
    start = time.perf_counter()
    mod, used = lower_graph(graph, tgt, base)
    with database:
        ex = relax_build(tgt, mod, tuned_pipeline(tgt))
    return Built(ex, tgt, "tuned", time.perf_counter() - start, used)


def relax_build(tgt: Any, mod: Any, pipeline: Any, tir_pipeline: str = "default",
                early: EarlyBuilds | None = None) -> Any:
    """relax.build; on llvm targets the kernels are compiled on several threads (and,
    for this machine, their machine code made there too: see parallel_build), those
    `early` built during the lowering taken from there."""
    threads = build_threads() if tgt.kind.name == "llvm" else 1
    try:
        with tgt, build_context():
            if threads > 1:
                return parallel_build(mod, tgt, pipeline, threads, jit=is_host(tgt),
                                      tir_pipeline=tir_pipeline, early=early)
            return relax().build(mod, target=tgt, relax_pipeline=pipeline,
                                 tir_pipeline=tir_pipeline)
    except Exception as e:
        raise CompileError(f"TVM failed to build the graph for {tgt}: {e}") from e
