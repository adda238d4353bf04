"""relay_bridge: megtrace's graph IR to TVM Relax and back, targets, builds and runs.

Named after Relay; TVM 0.27 has no Relay, so it speaks Relax.
"""
from .build import CompiledGraph, compile_graph, run_graph
from .lower import to_relax
from .targets import PRESETS, host_target, resolve

__all__ = ["CompiledGraph", "PRESETS", "compile_graph", "host_target", "resolve", "run_graph",
           "to_relax"]
