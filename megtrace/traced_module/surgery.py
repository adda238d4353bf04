"""Graph surgery: inside `with graph.insert_exprs():` calls on nodes (F.relu(node),
node + 1, module(node)) are recorded into the graph instead of computed."""
from __future__ import annotations

from typing import Optional

from ..tensor import Tensor
from .expr import GetAttr
from .node import ModuleNode, TensorNode
from .patcher import TENSOR_METHODS
from .tracer import Scope, Tracer
from .utils import assign_attr

_MISSING = object()

# how the builders of the modules traced inside an insert_exprs block become TracedModules
# (set by traced_module.py, which imports this module): build(builders) -> builder -> module
MODULE_BUILDER = None


def _node_method(name: str):
    def method(self, *args, **kwargs):
        return getattr(Tensor, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


def _module_node_getattr(self, name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    owner = self.owner
    if owner is None:
        raise AttributeError(f"the ModuleNode {self} is bound to no module")
    return getattr(owner, name)


def _module_node_call(self, *args, **kwargs):
    return self.owner(*args, **kwargs)


class InsertExprs:
    """The context manager graph.insert_exprs() returns."""

    def __init__(self, graph, after=None):
        self.graph, self.after = graph, after
        self._tracer: Optional[Tracer] = None
        self._undo: list = []

    def __enter__(self):
        graph = self.graph
        self._before = list(graph._exprs)
        owner = graph._inputs[0].owner if graph._inputs else None
        tracer = Tracer(type(graph))
        tracer.surgery = tracer.editing = True
        scope = Scope(graph, owner, graph._inputs[0] if graph._inputs else None)
        if owner is not None:
            scope.bind(owner, graph._inputs[0])
        tracer.scopes.append(scope)
        tracer.__enter__()
        self._tracer = tracer
        for name in TENSOR_METHODS:
            if hasattr(Tensor, name):
                self._patch(TensorNode, name, _node_method(name))
        self._patch(ModuleNode, "__getattr__", _module_node_getattr)
        self._patch(ModuleNode, "__call__", _module_node_call)
        return tracer

    def _patch(self, cls, name, value):
        self._undo.append((cls, name, cls.__dict__.get(name, _MISSING)))
        setattr(cls, name, value)

    def __exit__(self, *exc):
        while self._undo:
            cls, name, original = self._undo.pop()
            if original is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, original)
        self._tracer.__exit__(*exc)
        if exc[0] is None:
            self._place_new_exprs()
            self._build_inserted_modules()
        return False

    def _build_inserted_modules(self) -> None:
        """User modules called inside the block were traced: make them TracedModules, in
        place of the attributes the graph fetched them from."""
        tracer, graph = self._tracer, self.graph
        built = [b for b in tracer.builders.values() if b.graphs]
        if not built:
            return
        owner = graph._inputs[0].owner if graph._inputs else None
        build = MODULE_BUILDER(tracer.builders)
        scope = tracer.scopes[0] if tracer.scopes else None
        for builder in built:
            module = build(builder)
            node = scope.node_of(builder.module) if scope is not None else None
            fetch = node.expr if node is not None else None
            if owner is None or not isinstance(fetch, GetAttr) or \
                    fetch.inputs[0] is not graph._inputs[0]:
                continue          # a module reached another way keeps being called as is
            assign_attr(module, owner, fetch.name)
            node.module_type = type(module)
            for sub in module.argdef_graph_map.values():      # ids continue the top's
                graph._number_new(list(sub._iter_exprs(True)))
        owner._bind_graphs()

    def _place_new_exprs(self) -> None:
        """Move the recorded exprs from the end of the graph to just after `after` (or
        after the last expr that makes one of their inputs)."""
        graph = self.graph
        old = {id(e) for e in self._before}
        new = [e for e in graph._exprs if id(e) not in old]
        graph._exprs[:] = self._before
        if self.after is not None:
            index = graph._exprs.index(self.after) + 1
        else:
            producers = [graph._exprs.index(n.expr) for e in new for n in e.inputs
                         if n.expr is not None and id(n.expr) in old and n.expr in graph._exprs]
            index = max(producers) + 1 if producers else 0
        graph._exprs[index:index] = new
        graph._number_new(new)
        for node in graph.nodes(False):
            if isinstance(node, TensorNode):
                node.value = None


__all__ = ["InsertExprs"]
