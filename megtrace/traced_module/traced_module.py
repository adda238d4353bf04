"""TracedModule (a Module whose forward replays recorded graphs) and trace_module."""
from __future__ import annotations

import copy
import inspect
import weakref
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..module.module import Module
from ..module.qat import QATModule
from ..tensor import Tensor
from . import serialization, serialize, surgery
from .expr import Constant, GetAttr, Input, _get_attr_path
from .graph import InternalGraph
from .node import ModuleNode, Node
from .patcher import USER_FUNCTIONS
from .pytree import tree_flatten
from .tm_config import default_checker_enabled
from .tracer import BUILTIN_MODULES, Builder, Scope, Tracer
from .utils import convert_kwargs_to_args


class OpaqueMap:
    """A mapping but no dict, so Module's attribute walk (which looks into dicts for
    tensors and modules) passes over it: argdef (TreeDef of a call's arguments) -> graph
    or output TreeDef; watched node -> value."""

    def __init__(self, items=None):
        self._items: dict = dict(items or {})

    def __getitem__(self, key):
        return self._items[key]

    def __setitem__(self, key, value):
        self._items[key] = value

    def __contains__(self, key) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self):
        return self._items.keys()

    def values(self):
        return self._items.values()

    def items(self):
        return self._items.items()

    def __repr__(self) -> str:
        return repr(self._items)


class TracedModule(Module):
    """The Module trace_module makes: `forward` picks the graph recorded for the structure
    of its arguments and interprets it; `graph` shows (and lets you edit) that graph."""

    def __init__(self, is_top: bool, argdef_graph_map: dict, argdef_outdef_map: dict,
                 is_qat: bool = False):
        super().__init__()
        self.argdef_graph_map = OpaqueMap(argdef_graph_map)
        self.argdef_outdef_map = OpaqueMap(argdef_outdef_map)
        self._is_top = is_top
        self.watch_points: list = []
        self.watch_node_value = OpaqueMap()
        self.end_points: list = []
        self.is_qat = is_qat
        self.argspec = None

    def forward(self, *args, **kwargs):
        if self.argspec is not None:
            args, kwargs = convert_kwargs_to_args(self.argspec, args, kwargs, True)
        leaves, treedef = tree_flatten(((self, *args), kwargs))
        if treedef not in self.argdef_graph_map:
            raise AssertionError("support input args kwargs format: \n{}, but get: \n{}".format(
                "\n ".join(f"forward({k._args_kwargs_repr()})"
                           for k in self.argdef_graph_map.keys()),
                treedef._args_kwargs_repr()))
        inputs = [x for x in leaves if isinstance(x, (Module, Tensor))]
        graph = self.argdef_graph_map[treedef]
        values = graph.interpret(*inputs)
        if self.watch_points:
            self.watch_node_value = OpaqueMap(
                {n: n.top_graph._rst.pop(n) for n in self.watch_points if n in n.top_graph._rst})
        if self.end_points:
            return values
        return self.argdef_outdef_map[treedef].unflatten(values)

    @property
    def graph(self) -> InternalGraph:
        """The one graph of this module (traced for one argument structure)."""
        if len(self.argdef_graph_map) != 1:
            raise AssertionError("the module was traced for several argument structures; "
                                 "use argdef_graph_map")
        self._bind_graphs()
        return list(self.argdef_graph_map.values())[0]

    def set_watch_points(self, nodes) -> None:
        """Keep the values of `nodes` (in this graph or a called TracedModule's) at each
        run, in `watch_node_value`."""
        if not isinstance(nodes, Sequence):
            nodes = [nodes]
        self.watch_points = list(nodes)
        for n in nodes:
            n.top_graph._watch_point = []
        for n in nodes:
            n.top_graph._watch_point.append(n)

    def clear_watch_points(self) -> None:
        for n in self.watch_points:
            n.top_graph._watch_point = []
        self.watch_points = []
        self.watch_node_value = OpaqueMap()

    def set_end_points(self, nodes: Sequence[Node]) -> None:
        """Stop the forward once `nodes` are computed; it returns their values (a list)."""
        if not isinstance(nodes, Sequence):
            nodes = [nodes]
        graphs = list(self.argdef_graph_map.values())
        for n in nodes:
            if n.top_graph not in graphs:
                raise AssertionError(f"{n} is not a node of this module's graph")
        self.end_points = list(nodes)
        for n in nodes:
            n.top_graph._end_point.append(n)

    def clear_end_points(self) -> None:
        for n in self.end_points:
            n.top_graph._end_point = []
        self.end_points = []

    def _bind_graphs(self) -> None:
        """Point every ModuleNode at the module it stands for (after building, loading,
        copying or replacing submodules)."""
        for graph in self.argdef_graph_map.values():
            graph._inputs[0]._owner = weakref.ref(self)
            objects = {id(graph._inputs[0]): self}
            for expr in graph._exprs:
                out = expr.outputs[0] if expr.outputs else None
                if not isinstance(out, ModuleNode):
                    continue
                if isinstance(expr, GetAttr):
                    base = objects.get(id(expr.inputs[0]))
                    try:
                        obj = _get_attr_path(base, expr.name) if base is not None else None
                    except (AttributeError, IndexError, KeyError):
                        obj = None
                elif isinstance(expr, Constant):
                    obj = expr.value
                else:
                    obj = None
                if obj is not None:
                    out._owner = weakref.ref(obj)
                    objects[id(out)] = obj
                    if isinstance(obj, TracedModule) and obj is not self:
                        obj._bind_graphs()
                        for sub in obj.argdef_graph_map.values():
                            sub._top_graph = weakref.ref(graph)

    def flatten(self) -> "TracedModule":
        """A copy whose graph calls no TracedModule: every called TracedModule's graph is
        inlined (MegEngine's flatten)."""
        from .flatten import flatten_module
        return flatten_module(self)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["argdef_graph_map"] = [
            (serialize.treedef_state(k), serialize.graph_state(g))
            for k, g in self.argdef_graph_map.items()]
        state["argdef_outdef_map"] = [
            (serialize.treedef_state(k), serialize.treedef_state(v))
            for k, v in self.argdef_outdef_map.items()]
        state["argspec"] = None if self.argspec is None else tuple(self.argspec)
        state["watch_points"], state["end_points"], state["watch_node_value"] = [], [], {}
        return state

    def __deepcopy__(self, memo) -> "TracedModule":
        """A copy with its own graphs, submodules and tensors (types of any scope: no
        pickling on the way)."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = copy.deepcopy(value, memo)
        for graph in new.argdef_graph_map.values():
            graph._adopt()
        new._bind_graphs()
        return new

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        graphs = OpaqueMap()
        for key, g in state["argdef_graph_map"]:
            graphs[serialize.treedef_from_state(key)] = serialize.graph_from_state(
                g, InternalGraph)
        outdefs = OpaqueMap()
        for key, v in state["argdef_outdef_map"]:
            outdefs[serialize.treedef_from_state(key)] = serialize.treedef_from_state(v)
        state["argdef_graph_map"], state["argdef_outdef_map"] = graphs, outdefs
        state["watch_node_value"] = OpaqueMap()
        if state.get("argspec") is not None:
            state["argspec"] = inspect.FullArgSpec(*state["argspec"])
        super().__setstate__(state)
        self._bind_graphs()
        for graph in graphs.values():      # registered loaders may rewrite exprs
            serialization.run_loaders(graph)
        for graph in graphs.values():      # ids are kept; files without them get new ones
            if not graph._ids_valid():
                graph._reset_ids()


def register_as_builtin(mod_cls: type) -> None:
    """Trace calls of `mod_cls` modules as one CallMethod instead of tracing into them."""
    if not (isinstance(mod_cls, type) and issubclass(mod_cls, Module)):
        raise AssertionError("register_as_builtin takes a Module subclass")
    BUILTIN_MODULES.add(mod_cls)


def wrap(func: Callable) -> Callable:
    """Register a module-level function as builtin: trace_module records its calls as one
    CallFunction (use at module level, or as a decorator there)."""
    if not callable(func):
        raise AssertionError("func must be a callable")
    if not hasattr(func, "__code__"):
        raise AssertionError("func must be a Python function")
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise AssertionError("wrap must be called at the top level of a module")
    serialize.USER_REGISTERED_FUNCTION.append((func.__module__, func.__qualname__))
    USER_FUNCTIONS.append((frame.f_globals, func.__code__.co_name))
    return func


def _register_all_builtin_module() -> None:
    """megtrace.module's layers (and its qat/quantized/external families where present)
    are builtin, except Sequential, whose forward is traced into."""
    from .. import module as M
    namespaces = [M] + [getattr(M, sub) for sub in ("qat", "quantized", "external")
                        if hasattr(M, sub)]
    for namespace in namespaces:
        for value in vars(namespace).values():
            if isinstance(value, type) and issubclass(value, Module) and \
                    value not in (Module, M.Sequential):
                BUILTIN_MODULES.add(value)


def _forward_argspec(module: Module) -> inspect.FullArgSpec:
    spec = getattr(module, "argspec", None)
    if not isinstance(spec, inspect.FullArgSpec):
        spec = inspect.getfullargspec(module.forward)
        spec = spec._replace(annotations={})
    return spec


class _Build:
    """Turns the tracer's builders into TracedModules, sharing one per module object."""

    def __init__(self, builders: dict[int, Builder]):
        self.builders = builders
        self.keep_submodules = False

    def convert(self, value):
        if isinstance(value, Module):
            builder = self.builders.get(id(value))
            return self.module(builder) if builder is not None else value
        if _module_container(value):
            return self._container(value)
        if isinstance(value, (list, tuple)):
            items = [self.convert(v) for v in value]
            if all(a is b for a, b in zip(items, value)):
                return value
            return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
        if isinstance(value, dict):
            items = {k: self.convert(v) for k, v in value.items()}
            if all(items[k] is value[k] for k in value):
                return value
            out = copy.copy(value)
            out.update(items)
            return out
        return value

    def _container(self, value) -> "TracedModule":
        """A list/dict of modules becomes a module holding them as attributes "0", "1", ...
        or by key (MegEngine's module containers), so graphs fetch "layers.0"."""
        container = TracedModule(False, {}, {})
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            setattr(container, str(key), self.convert(item))
        return container

    def module(self, builder: Builder):
        if builder.built is not None:
            return builder.built
        mod = builder.module
        if not builder.graphs:            # never called: it stays what it was
            builder.built = mod
            return mod
        tm = TracedModule(builder.is_top, builder.graphs, builder.out_defs)
        builder.built = tm
        tm.training = mod.training
        # only the top module converts keyword arguments (trace_module sets its argspec);
        # a submodule is called from its caller's graph with the recorded structure
        for graph in builder.graphs.values():
            for expr in graph._exprs:
                if isinstance(expr, GetAttr) and expr.inputs[0] is graph._inputs[0]:
                    self._copy_path(mod, tm, expr.name.split("."))
                elif isinstance(expr, Constant) and isinstance(expr.value, Module):
                    expr.value = self.convert(expr.value)
            graph.compile()
        # a submodule the forward used under another name too (self.b = self.a) is an
        # attribute under both names, as MegEngine's builder fetches both
        used = {id(v) for k, v in vars(mod).items() if k in vars(tm) and isinstance(v, Module)}
        for key, value in vars(mod).items():
            if key not in vars(tm) and isinstance(value, Module) and id(value) in used:
                setattr(tm, key, self.convert(value))
        if self.keep_submodules:
            # traced inside an insert_exprs block: MegEngine's builder stays live for the
            # rest of the block, so submodules fetched later (self.new.relu) come along
            for key, value in vars(mod).items():
                if key not in vars(tm) and _holds_module(value):
                    setattr(tm, key, self.convert(value))
        if isinstance(mod, QATModule):      # MegEngine: a traced QAT module stays one
            tm.is_qat = True
            tm.with_act, tm.with_weight = mod.with_act, mod.with_weight
            for key in ("act_fake_quant", "act_observer", "weight_fake_quant",
                        "weight_observer"):
                if not hasattr(tm, key):
                    setattr(tm, key, None)
        return tm

    def _copy_path(self, orig, tm, parts: list[str]) -> None:
        """Give `tm` (and the TracedModules on the way) the attributes along `parts`."""
        for part in parts:
            if isinstance(tm, TracedModule) and part not in vars(tm):
                setattr(tm, part, self.convert(getattr(orig, part)))
            orig, tm = _get_attr_path(orig, part), _get_attr_path(tm, part)


def _module_container(value) -> bool:
    """A non-empty list/tuple/dict whose items are all modules or such containers."""
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        items = list(value)
    elif isinstance(value, dict):
        items = list(value.values())
    else:
        return False
    return bool(items) and all(isinstance(v, Module) or _module_container(v) for v in items)


def _holds_module(value) -> bool:
    if isinstance(value, Module):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_module(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_module(v) for v in value.values())
    return False


def _inserted_module_builder(builders: dict):
    build = _Build(builders)
    build.keep_submodules = True
    return build.module


surgery.MODULE_BUILDER = _inserted_module_builder


def trace_module(mod: Module, *args: Any, **kwargs: Any) -> TracedModule:
    """Trace `mod`'s forward on these arguments into a TracedModule: calls of builtin
    modules and functions, Tensor methods and submodule forwards become a graph."""
    if not isinstance(mod, Module):
        raise AssertionError(f"trace_module expects a Module, got {type(mod).__name__}")
    net_name = mod._name if mod._name else type(mod).__name__
    argspec = _forward_argspec(mod)
    tracer = Tracer(InternalGraph)
    builder = Builder(mod, True)
    tracer.builders[id(mod)] = builder
    with tracer:
        root = InternalGraph("top", net_name)
        top_input = Input(ModuleNode, "top", net_name, module_type=type(mod))
        root._insert(top_input)
        root._add_input(top_input.outputs[0])
        scope = Scope(root, None, None)
        scope.bind(mod, top_input.outputs[0])
        tracer.scopes.append(scope)
        args, kwargs = convert_kwargs_to_args(argspec, args, kwargs, True)
        tree_flatten((argspec.defaults, argspec.kwonlydefaults))
        original_args, original_kwargs = args, kwargs
        args, kwargs = copy.deepcopy((args, kwargs))
        leaves, _ = tree_flatten((args, kwargs))
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tensor):
                inp = Input(type(tracer._new_node(leaf)), f"arg_{i}", f"{net_name}.[arg_{i}]")
                root._insert(inp)
                root._add_input(inp.outputs[0])
                scope.bind(leaf, inp.outputs[0])
        result = mod(*args, **kwargs)
        tracer.scopes.pop()
    traced = _Build(tracer.builders).module(builder)
    traced.argspec = argspec
    traced._bind_graphs()
    traced.graph._reset_ids()
    if default_checker_enabled():
        _check_outputs(traced(*original_args, **original_kwargs), result)
    return traced


def _check_outputs(got, want) -> None:
    """MegEngine's default checker: the traced module must reproduce the outputs."""
    got_leaves, _ = tree_flatten(got, is_leaf=lambda x: isinstance(x, Tensor))
    want_leaves, _ = tree_flatten(want, is_leaf=lambda x: isinstance(x, Tensor))
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(g.numpy(), w.numpy())
