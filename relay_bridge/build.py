"""Build a Relax module for a target and run it with the Relax VM."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from megtrace.errors import CompileError
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

    def __post_init__(self):
        kind = self.target.kind.name
        dev = tvm().cpu(0) if kind == "llvm" else tvm().device(kind, 0)
        self._device = dev
        self._vm = relax().VirtualMachine(self.executable, dev)
        self._main = self._vm["main"]

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        t = tvm()
        args = [t.runtime.tensor(np.ascontiguousarray(a), self._device) for a in arrays]
        result = self._main(*args)
        return [r.numpy() for r in result]


def compile_graph(graph: Graph, target: Any = None) -> CompiledGraph:
    """Lower `graph` to Relax and build it (default Relax pipeline: legalize, fold, fuse)."""
    tgt = resolve(target)
    mod = to_relax(graph)
    rx = relax()
    start = time.perf_counter()
    try:
        with tgt, tvm().transform.PassContext(opt_level=3):
            ex = rx.build(mod, target=tgt, relax_pipeline=rx.get_default_pipeline(tgt))
    except Exception as e:
        raise CompileError(f"TVM failed to build the graph for {tgt}: {e}") from e
    return CompiledGraph(graph, tgt, ex, time.perf_counter() - start)


def run_graph(graph: Graph, inputs: Sequence[np.ndarray], target: Any = None) -> list[np.ndarray]:
    return compile_graph(graph, target)(*inputs)
