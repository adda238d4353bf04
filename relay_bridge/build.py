"""Build a Relax module for a target and run it with the Relax VM."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from megtrace.errors import CompileError, MegtraceError
from megtrace.ir import Graph

from ._tvm import relax, tvm
from .lower import to_relax
from .targets import resolve


@dataclass
class CompiledGraph:
    """A graph compiled by TVM: call it with NumPy arrays, get a list of NumPy arrays."""

    graph: Graph
    target: Any
    executable: Any
    build_seconds: float
    rules: list[str] = field(default_factory=list)   # CPU rule kernels used (llvm only)
    pipeline: str = "default"                         # "cpu-rules" or "default"

    def __post_init__(self):
        kind = self.target.kind.name
        dev = tvm().cpu(0) if kind == "llvm" else tvm().device(kind, 0)
        self._device = dev
        self._vm = relax().VirtualMachine(self.executable, dev)
        self._main = self._vm["main"]

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        t = tvm()
        args = [t.runtime.tensor(a if a.flags.c_contiguous else a.copy(), self._device)
                for a in arrays]
        result = self._main(*args)
        return [r.numpy() for r in result]


def compile_graph(graph: Graph, target: Any = None, *, rules: bool | None = None
                  ) -> CompiledGraph:
    """Lower `graph` to Relax and build it.

    On llvm targets the CPU rules (relay_bridge.cpu: blocked-layout conv, packed dense,
    threads and vectors everywhere) are used unless `rules=False` or the environment has
    MEGTRACE_CPU_RULES=0; other targets use TVM's default pipeline for their kind. If a
    build with the rules fails, the graph is built again on the default path.
    """
    tgt = resolve(target)
    if uses_cpu_rules(tgt, rules):
        try:
            return _build_with_rules(graph, tgt)
        except Exception as e:   # a bug in a rule must not stop a graph TVM can build
            if isinstance(e, MegtraceError) and not isinstance(e, CompileError):
                raise            # the graph's own error (unsupported op, bad lowering)
            first = (str(e).strip().splitlines() or [""])[0]
            logging.getLogger(__name__).warning(
                "CPU rules failed to build the graph (%s: %s); using the default path",
                type(e).__name__, first)
    start = time.perf_counter()
    mod = to_relax(graph)
    ex = _build(tgt, mod, relax().get_default_pipeline(tgt))
    return CompiledGraph(graph, tgt, ex, time.perf_counter() - start)


def uses_cpu_rules(target: Any, rules: bool | None = None) -> bool:
    """Whether compile_graph takes the CPU rules for this (resolved) target: llvm only,
    unless `rules` is False or MEGTRACE_CPU_RULES is 0/false/off."""
    if rules is None:
        rules = os.environ.get("MEGTRACE_CPU_RULES", "1").lower() not in ("0", "false", "off")
    return bool(rules) and target.kind.name == "llvm"


def _build_with_rules(graph: Graph, tgt: Any) -> CompiledGraph:
    from .cpu import cpu_pipeline, to_relax_cpu
    start = time.perf_counter()
    mod, used = to_relax_cpu(graph)
    ex = _build(tgt, mod, cpu_pipeline(tgt))
    return CompiledGraph(graph, tgt, ex, time.perf_counter() - start, used, "cpu-rules")


def _build(tgt: Any, mod: Any, pipeline: Any) -> Any:
    rx = relax()
    try:
        with tgt, tvm().transform.PassContext(opt_level=3):
            return rx.build(mod, target=tgt, relax_pipeline=pipeline)
    except Exception as e:
        raise CompileError(f"TVM failed to build the graph for {tgt}: {e}") from e


def run_graph(graph: Graph, inputs: Sequence[np.ndarray], target: Any = None) -> list[np.ndarray]:
    return compile_graph(graph, target)(*inputs)
