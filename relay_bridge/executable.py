"""Build a Graph into a TVM executable for any target, without running it.

`compile_graph` also creates a VM, which only works on the machine the target
describes; exporting and cross-compiling (aarch64, CUDA without a GPU) need the
executable alone. The choice of path mirrors compile_graph: the CPU rules on llvm
targets unless disabled, TVM's default pipeline otherwise or when the rules fail.
"""
from __future__ import annotations

import logging
import platform
import time
from dataclasses import dataclass, field
from typing import Any

from megtrace.errors import CompileError, MegtraceError
from megtrace.ir import Graph

from ._tvm import relax, tvm
from . import cpu as cpu_rules
from .pipelines import lower_graph, tuned_pipeline
from .targets import resolve, uses_cpu_rules

log = logging.getLogger(__name__)


@dataclass
class Built:
    """An executable and how it was made."""

    executable: Any
    target: Any
    pipeline: str                      # "cpu-rules", "default" or "tuned"
    seconds: float
    rules: list[str] = field(default_factory=list)


def is_host(target: Any) -> bool:
    """Whether code for `target` runs on this machine's CPU."""
    if target.kind.name != "llvm":
        return False
    triple = str(target.attrs.get("mtriple", "") or "")
    return not triple or triple.split("-")[0] == platform.machine()


def rules_wanted(target: Any, rules: bool | None) -> bool:
    """compile_graph's own choice (llvm, unless rules=False or MEGTRACE_CPU_RULES=0)."""
    return uses_cpu_rules(target, rules)


def build_executable(graph: Graph, target: Any = None, *, rules: bool | None = None) -> Built:
    """The executable compile_graph would build, for any target."""
    tgt = resolve(target)
    start = time.perf_counter()
    if rules_wanted(tgt, rules):
        try:
            mod, used = lower_graph(graph, tgt, "rules")
            ex = relax_build(tgt, mod, cpu_rules.cpu_pipeline(tgt))
            return Built(ex, tgt, "cpu-rules", time.perf_counter() - start, used)
        except Exception as e:        # same policy as compile_graph: fall back
            if isinstance(e, MegtraceError) and not isinstance(e, CompileError):
                raise                 # the graph's own error (unsupported op, ...)
            first = (str(e).strip().splitlines() or [""])[0]
            log.warning("CPU rules failed to build the graph (%s: %s); using the default "
                        "path", type(e).__name__, first)
    mod, _ = lower_graph(graph, tgt, "default")
    ex = relax_build(tgt, mod, relax().get_default_pipeline(tgt))
    return Built(ex, tgt, "default", time.perf_counter() - start)


def build_tuned_executable(graph: Graph, target: Any, database: Any, base: str) -> Built:
    """Build with the records of `database` (tuned on the `base` lowering)."""
    tgt = resolve(target)
    start = time.perf_counter()
    mod, used = lower_graph(graph, tgt, base)
    with database:
        ex = relax_build(tgt, mod, tuned_pipeline(tgt))
    return Built(ex, tgt, "tuned", time.perf_counter() - start, used)


def relax_build(tgt: Any, mod: Any, pipeline: Any) -> Any:
    try:
        with tgt, tvm().transform.PassContext(opt_level=3):
            return relax().build(mod, target=tgt, relax_pipeline=pipeline)
    except Exception as e:
        raise CompileError(f"TVM failed to build the graph for {tgt}: {e}") from e
