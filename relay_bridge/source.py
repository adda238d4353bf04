"""What export and tuning accept as a model: a Graph, a CompiledGraph, or any model
that carries a recorded graph and its target (a traced function, a `load_graph` model:
both have public `graph` and `target`). One place turns any of them into a Graph (and
the target it was meant for), so bad input fails here with a TypeError naming the
argument instead of deep inside TVM. It asks the model for what it carries instead of
importing the tracer, which itself builds through this package."""
from __future__ import annotations

from typing import Any

from megtrace.errors import TraceError
from megtrace.ir import Graph


def graph_of(model: Any, arg: str = "model") -> tuple[Graph, Any]:
    """(graph, the model's own target or None) of `model`."""
    # lazy: build imports compile_cache -> export -> this module (a cycle left to fix)
    from .build import CompiledGraph

    if isinstance(model, Graph):
        graph, target = model, None
    elif isinstance(model, CompiledGraph):
        graph, target = model.graph, model.target
    elif _carries_graph(model):
        try:
            graph = model.graph
        except TraceError as e:
            raise ValueError(f"{arg}: the traced function has not been called yet; call it "
                             "once with example inputs so that there is a graph") from e
        target = model.target
    else:
        graph = None
    if not isinstance(graph, Graph):
        raise TypeError(f"{arg}: expected a megtrace Graph, a traced function "
                        "(megtrace.jit.trace), a model from megtrace.load_graph or a "
                        f"relay_bridge CompiledGraph; got {type(model).__name__}")
    if not graph.outputs:
        raise ValueError(f"{arg}: the graph has no outputs, so there is nothing to build")
    return graph, target


def options_of(model: Any) -> Any:
    """The BuildOptions `model` was compiled with: a traced function's opt_level and
    graph_opt_config (its public `build_options`); None (the default build) for
    anything else."""
    return model.build_options if isinstance(getattr(type(model), "build_options", None),
                                             property) else None


def _carries_graph(model: Any) -> bool:
    """A traced function or a loaded model: a `target` property and a `graph` (a
    property of a traced function, which raises until it is called)."""
    cls = type(model)
    return isinstance(getattr(cls, "target", None), property) and \
        (isinstance(getattr(cls, "graph", None), property) or "graph" in vars(model))
