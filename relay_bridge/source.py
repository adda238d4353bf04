"""What export and tuning accept as a model: a Graph, a traced function, a loaded .mge
model or a CompiledGraph. One place turns any of them into a Graph (and the target it
was meant for), so bad input fails here with a TypeError naming the argument instead
of deep inside TVM."""
from __future__ import annotations

from typing import Any

from megtrace.ir import Graph


def graph_of(model: Any, arg: str = "model") -> tuple[Graph, Any]:
    """(graph, the model's own target or None) of `model`."""
    from megtrace.errors import TraceError
    from megtrace.graph_io import LoadedGraph
    from megtrace.jit import trace

    from .build import CompiledGraph

    if isinstance(model, Graph):
        graph, target = model, None
    elif isinstance(model, CompiledGraph):
        graph, target = model.graph, model.target
    elif isinstance(model, LoadedGraph):
        graph, target = model.graph, getattr(model, "_target", None)
    elif isinstance(model, trace):
        try:
            graph = model.graph
        except TraceError as e:
            raise ValueError(f"{arg}: the traced function has not been called yet; call it "
                             "once with example inputs so that there is a graph") from e
        target = getattr(model, "_target", None)
    else:
        raise TypeError(f"{arg}: expected a megtrace Graph, a traced function "
                        "(megtrace.jit.trace), a model from megtrace.load_graph or a "
                        f"relay_bridge CompiledGraph; got {type(model).__name__}")
    if not graph.outputs:
        raise ValueError(f"{arg}: the graph has no outputs, so there is nothing to build")
    return graph, target


def options_of(model: Any) -> Any:
    """The BuildOptions `model` was compiled with: a traced function's opt_level and
    graph_opt_config; None (the default build) for anything else."""
    from megtrace.jit import trace
    return model._build_options() if isinstance(model, trace) else None
