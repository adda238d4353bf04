"""The recording side of trace_module: which graph is being built (a stack of scopes, one
per module forward being traced), which node stands for each tensor/module in it, and how
a call of a functional, a Tensor method, a Module or a bare registry op becomes an Expr."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

import numpy as np

from .. import dispatch
from ..module.module import Module, _expand_structure
from ..quantization.fake_quant import _FakeQuantize
from ..quantization.observer import Observer
from ..tensor import Tensor
from .expr import Apply, CallFunction, CallMethod, Constant, Expr, GetAttr, Input
from .node import ModuleNode, Node, TensorNode
from .pytree import ArgsIndex, TreeDef, is_variable, tree_flatten
from .patcher import Patcher
from .shapes import TracedDim, dim, dim_arith
from .utils import convert_kwargs_to_args

# classes traced as one CallMethod (not into their forward); register_as_builtin adds more
BUILTIN_MODULES: set[type] = set()

_active: Optional["Tracer"] = None


def active_tracer() -> Optional["Tracer"]:
    return _active


def is_builtin(module: Module) -> bool:
    """Called as one CallMethod, not traced into: builtin module classes, and (as in
    MegEngine) every observer and fake quantizer, user subclasses included."""
    return type(module) in BUILTIN_MODULES or isinstance(module, (Observer, _FakeQuantize))


class Scope:
    """One graph being recorded, for `module`'s forward: the nodes bound to live objects."""

    def __init__(self, graph, module: Optional[Module], self_node: Optional[ModuleNode]):
        self.graph, self.module, self.self_node = graph, module, self_node
        self._bound: dict[int, tuple[Any, Node]] = {}
        self._paths: Optional[dict[int, str]] = None

    def bind(self, obj, node: Node) -> None:
        self._bound[id(obj)] = (obj, node)     # keeps obj alive: its id stays unique

    def node_of(self, obj) -> Optional[Node]:
        hit = self._bound.get(id(obj))
        return hit[1] if hit is not None else None

    def path_of(self, obj) -> Optional[str]:
        """The dotted attribute path of `obj` from this scope's module, if any."""
        if self.module is None:
            return None
        if self._paths is None:
            self._paths = {}
            self._index(self.module, "", {id(self.module)})
        return self._paths.get(id(obj))

    def _index(self, module: Module, prefix: str, seen: set) -> None:
        subs = []
        for key, value in list(vars(module).items()):
            for dotted, leaf in _expand_structure(prefix + key, value):
                if id(leaf) in seen:
                    continue
                seen.add(id(leaf))
                self._paths.setdefault(id(leaf), dotted)
                if isinstance(leaf, Module):
                    subs.append((leaf, dotted))
        for sub, dotted in subs:
            self._index(sub, dotted + ".", seen)


class _ApplyRecorder:
    """Receives the registry ops applied outside any patched call (e.g. on a tensor's
    shape): they become Apply exprs (MegEngine: Apply of an OpDef)."""

    names_values = False

    def __init__(self, tracer: "Tracer"):
        self._tracer = tracer

    def record(self, op, inputs: tuple, params: dict) -> tuple:
        outs = dispatch.run_eager(op, inputs, params)
        self._tracer.record_apply(op.name, params, inputs, outs)
        return outs

    def created(self, tensor) -> None:       # a new tensor is a constant when used
        pass

    def materialize_live(self) -> None:
        pass

    def random_key(self, seed, kind, device) -> None:
        return None          # drawn eagerly


class Builder:
    """What tracing learned about one user module: a graph per argument structure."""

    def __init__(self, module: Module, is_top: bool):
        self.module, self.is_top = module, is_top
        self.graphs: dict[TreeDef, Any] = {}
        self.out_defs: dict[TreeDef, TreeDef] = {}
        self.built = None


def _out_leaf(x) -> bool:
    if not isinstance(x, (Tensor, Node)):
        raise AssertionError(
            f"doesn't support {type(x)} in return values, MUST use Tensor or use "
            "\"register_supported_type\" method to register self-defined type")
    return True


class Tracer:
    """The state of one trace_module call (or of one graph-surgery `insert_exprs` block)."""

    def __init__(self, new_graph: Callable[[str, str], Any]):
        self.new_graph = new_graph
        self.scopes: list[Scope] = []
        self.builders: dict[int, Builder] = {}
        self._opaque = 0
        self.surgery = False      # calls take nodes (inside graph.insert_exprs)
        self.editing = False      # an insert_exprs block: called modules are not traced into
        self.patcher = Patcher(self)
        self._recorder = _ApplyRecorder(self)

    # -- activation ---------------------------------------------------------------------
    def __enter__(self):
        global _active
        if _active is not None:
            raise AssertionError("trace_module cannot run inside another trace_module")
        _active = self
        self.patcher.__enter__()
        self._recording = dispatch.recording(self._recorder)
        self._recording.__enter__()
        return self

    def __exit__(self, *exc):
        global _active
        self._recording.__exit__(*exc)
        self.patcher.__exit__(*exc)
        _active = None
        return False

    def recording_calls(self) -> bool:
        return self._opaque == 0 and _active is self

    class _OpaqueRegion:
        """Inside a recorded call nothing more is recorded: its ops run eagerly."""

        def __init__(self, tracer: "Tracer"):
            self.tracer = tracer

        def __enter__(self):
            self.tracer._opaque += 1
            self._rec = dispatch.recording(None)
            self._rec.__enter__()

        def __exit__(self, *exc):
            self._rec.__exit__(*exc)
            self.tracer._opaque -= 1
            return False

    def opaque(self):
        return Tracer._OpaqueRegion(self)

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    # -- nodes --------------------------------------------------------------------------
    def node_for(self, obj) -> Node:
        """The node standing for `obj` in the current graph: bound already, an attribute of
        the graph's module (GetAttr), or a constant."""
        if isinstance(obj, Node):
            return obj
        scope = self.scope
        node = scope.node_of(obj)
        if node is not None:
            return node
        node = self._new_node(obj)
        path = scope.path_of(obj)
        if path is not None and scope.self_node is not None:
            expr = GetAttr(scope.self_node, path, node)
        else:
            if isinstance(obj, Module) and not is_builtin(obj):
                self.builders.setdefault(id(obj), Builder(obj, False))
            # a tensor constant is its value now: in-place updates the forward makes later
            # (y = Tensor(x); y += 1) are recorded exprs, not changes of the constant
            value = Tensor._wrap(obj.numpy(), device=obj.device) \
                if isinstance(obj, Tensor) and obj._value is not None else obj
            expr = Constant(value, node)
        scope.graph._insert(expr)
        scope.bind(obj, node)
        return node

    @staticmethod
    def _new_node(obj, expr: Expr = None) -> Node:
        if isinstance(obj, Module):
            return ModuleNode(expr, module_type=type(obj))
        return TensorNode(expr, shape=tuple(obj.shape), dtype=obj.dtype,
                          qparams=getattr(obj, "_qparams", None))

    def _bind_outputs(self, expr: Expr, outputs: list) -> None:
        expr.outputs = [self._new_node(t, expr) for t in outputs]
        self.scope.graph._insert(expr)
        for t, node in zip(outputs, expr.outputs):
            self.scope.bind(t, node)

    def _argument_nodes(self, leaves: list) -> list:
        return [self.node_for(x) if is_variable(x) else
                self._dim_node(x) if isinstance(x, TracedDim) else None for x in leaves]

    def traced_shape(self, tensor: Tensor, shape: tuple) -> tuple:
        """`tensor.shape` while recording: TracedDims for a tensor the graph computes."""
        node = self.scope.node_of(tensor) if self.scopes else None
        if node is None or isinstance(node.expr, (GetAttr, Constant)):
            return shape
        return tuple(TracedDim(d, ("dim", tensor, axis)) for axis, d in enumerate(shape))

    def _dim_node(self, d: TracedDim) -> Node:
        """The node computing `d` in the current graph (recorded on first use)."""
        scope = self.scope
        cached = scope.node_of(d)
        if cached is not None:
            return cached
        if d.expr[0] == "dim":
            func, args = dim, (d.expr[1], d.expr[2])
        else:
            func, args = dim_arith, d.expr
        leaves, arg_def = tree_flatten((args, {}))
        expr = CallFunction(func)
        expr.arg_def = arg_def
        expr.set_args(leaves, self._argument_nodes(leaves))
        expr.out_def = tree_flatten(int(d))[1]
        expr.outputs = [TensorNode(expr, shape=(), dtype=np.dtype("int32"))]
        scope.graph._insert(expr)
        scope.bind(d, expr.outputs[0])
        return expr.outputs[0]

    # -- recording calls ----------------------------------------------------------------
    def _record_call(self, expr: Expr, leaves: list, arg_def: TreeDef, run: Callable):
        expr.arg_def = arg_def
        expr.set_args(leaves, self._argument_nodes(leaves))
        with self.opaque():
            result = run()
        return self._finish(expr, result)

    def _finish(self, expr: Expr, result):
        """Give `expr` the results' nodes and put it in the graph. A call that made no
        tensor (a shape helper answering ints) stays plain Python: nothing is recorded."""
        if result is None:
            self.scope.graph._insert(expr)
            return None
        outputs, out_def = tree_flatten(result, is_leaf=lambda x: True)
        if not any(isinstance(x, Tensor) for x in outputs):
            for node in expr.inputs:
                node.users.remove(expr)
            return result
        for x in outputs:
            _out_leaf(x)
        expr.out_def = out_def
        self._bind_outputs(expr, outputs)
        return result

    def call_function(self, func: Callable, args: tuple, kwargs: dict):
        if self.surgery:
            return self._on_nodes(lambda a, k: self.call_function(func, a, k), args, kwargs)
        leaves, arg_def = tree_flatten((args, kwargs))     # unsupported types fail here
        try:
            args, kwargs = convert_kwargs_to_args(func, args, kwargs)
            leaves, arg_def = tree_flatten((args, kwargs))
        except (TypeError, ValueError, AssertionError):
            pass        # no Python signature, or a default no graph can hold: keep as called
        return self._record_call(CallFunction(func), leaves, arg_def,
                                 lambda: func(*args, **kwargs))

    def call_method(self, name: str, method: Callable, args: tuple, kwargs: dict):
        if self.surgery:
            return self._on_nodes(lambda a, k: self.call_method(name, method, a, k),
                                  args, kwargs)
        leaves, arg_def = tree_flatten((args, kwargs))
        try:        # MegEngine stores a method's arguments positionally: x.sum(1, True, )
            args, kwargs = convert_kwargs_to_args(method, args, kwargs)
            leaves, arg_def = tree_flatten((args, kwargs))
        except (TypeError, ValueError, AssertionError):
            pass

        def run():
            result = method(*args, **kwargs)
            return args[0] if name == "__setitem__" else result

        return self._record_call(CallMethod(name), leaves, arg_def, run)

    def call_module(self, module: Module, args: tuple, kwargs: dict, call: Callable):
        if self.surgery:
            return self._on_nodes(lambda a, k: self.call_module(module, a, k, call),
                                  args, kwargs)
        args, kwargs = convert_kwargs_to_args(type(module).forward, args, kwargs, bound=True)
        args, kwargs = _plain_dims((args, kwargs))   # a submodule's graph takes ints as given
        self._fresh_fetch_for_repeated_call(module)
        leaves, arg_def = tree_flatten(((module, *args), kwargs))
        expr = CallMethod("__call__")
        expr.arg_def = arg_def
        expr.set_args(leaves, self._argument_nodes(leaves))
        builder = self.builders.get(id(module))
        # while editing a graph, a user module inserted there is traced into (it becomes
        # a TracedModule when the block ends); TracedModules keep their own graphs
        if builder is None and not is_builtin(module) and \
                not (self.editing and hasattr(module, "argdef_graph_map")):
            builder = self.builders.setdefault(id(module), Builder(module, False))
        if builder is None or arg_def in builder.graphs:
            with self.opaque():
                result = call(module, *args, **kwargs)
        else:
            result = self._trace_forward(builder, expr.inputs[0], leaves, arg_def,
                                         args, kwargs)
        return self._finish(expr, result)

    def _fresh_fetch_for_repeated_call(self, module: Module) -> None:
        """A submodule called again is fetched again (MegEngine reads `self.block` anew on
        each call: the second call's results are named block_1_out); compile() merges the
        fetches."""
        scope = self.scope
        node = scope.node_of(module)
        if node is None or not isinstance(node.expr, GetAttr) or not any(
                isinstance(u, CallMethod) and u.method == "__call__" and u.inputs[0] is node
                for u in node.users):
            return
        fresh = self._new_node(module)
        scope.graph._insert(GetAttr(node.expr.inputs[0], node.expr.name, fresh))
        scope.bind(module, fresh)

    def _trace_forward(self, builder: Builder, module_node: ModuleNode, leaves: list,
                       arg_def: TreeDef, args: tuple, kwargs: dict):
        """Record `builder.module`'s forward on these arguments into a new graph."""
        module = builder.module
        qualname = module_node.qualname
        parent = self.scope.graph
        graph = self.new_graph(parent._namespace.create_unique_name(qualname), qualname)
        self_input = Input(ModuleNode, "self", qualname, module_type=type(module))
        graph._insert(self_input)
        graph._add_input(self_input.outputs[0])
        scope = Scope(graph, module, self_input.outputs[0])
        scope.bind(module, self_input.outputs[0])
        arg_names = _argument_names(type(module).forward, arg_def, len(leaves))
        for index, leaf in enumerate(leaves[1:], start=1):
            if isinstance(leaf, (Tensor, Module)):
                name = arg_names.get(index, f"arg_{index}")
                inp = Input(type(self._new_node(leaf)), name, f"{qualname}.[{name}]")
                node = inp.outputs[0]
                if isinstance(leaf, Tensor):
                    node.shape, node.dtype = tuple(leaf.shape), leaf.dtype
                else:
                    node.module_type = type(leaf)
                graph._insert(inp)
                graph._add_input(node)
                if scope.node_of(leaf) is None:
                    scope.bind(leaf, node)
        forward = type(module).forward
        self.patcher.auto_patch(getattr(forward, "__globals__", {}))
        self.scopes.append(scope)
        try:
            result = forward(module, *args, **kwargs)
            outputs, out_def = tree_flatten(
                result, is_leaf=lambda x: isinstance(x, Tensor) or _out_leaf(x))
            for out in outputs:
                graph._add_output(self.node_for(out))
        finally:
            self.scopes.pop()
        builder.graphs[arg_def] = graph
        builder.out_defs[arg_def] = out_def
        return result

    def rename_node(self, tensor: Tensor, name: str) -> None:
        """The node of `tensor` in the graph being recorded takes the name `name`."""
        node = self.scope.node_of(tensor)
        if isinstance(node, TensorNode) and node.top_graph is self.scope.graph and \
                node.name != name:
            node.name = name

    def record_apply(self, op_name: str, params: dict, inputs: tuple, outs: tuple) -> None:
        if not self.scopes or not self.recording_calls():
            return
        expr = Apply(op_name, params)
        for t in inputs:
            expr.add_input(self.node_for(t))
        self._bind_outputs(expr, list(outs))

    # -- graph surgery ------------------------------------------------------------------
    def _on_nodes(self, call: Callable, args: tuple, kwargs: dict):
        """A call on nodes (inside graph.insert_exprs): run it on stand-in tensors bound to
        those nodes, and answer with the nodes of its results."""
        leaves, arg_def = tree_flatten((args, kwargs))
        values = []
        with self.opaque():
            for leaf in leaves:
                if isinstance(leaf, TensorNode):
                    value = leaf.value
                    if value is None:
                        value = Tensor(np.zeros(leaf.shape or (), dtype=leaf.dtype or
                                                "float32"))
                    self.scope.bind(value, leaf)
                    values.append(value)
                elif isinstance(leaf, ModuleNode):
                    self.scope.bind(leaf.owner, leaf)
                    values.append(leaf.owner)
                else:
                    values.append(leaf)
        args, kwargs = arg_def.unflatten(values)
        self.surgery = False
        try:
            result = call(args, kwargs)
        finally:
            self.surgery = True
        if result is None:
            return None
        outputs, out_def = tree_flatten(result, is_leaf=lambda x: isinstance(x, Tensor) or
                                        _out_leaf(x))
        nodes = []
        for out in outputs:
            node = self.scope.node_of(out) if isinstance(out, Tensor) else out
            if isinstance(node, TensorNode):
                node.value = out
            nodes.append(node)
        return out_def.unflatten(nodes)


def _plain_dims(value):
    if isinstance(value, TracedDim):
        return int(value)
    if type(value) in (list, tuple):
        return type(value)(_plain_dims(v) for v in value)
    if type(value) is dict:
        return {k: _plain_dims(v) for k, v in value.items()}
    return value


def _argument_names(forward: Callable, arg_def: TreeDef, count: int) -> dict[int, str]:
    """Leaf index -> the forward parameter it belongs to ("x", or "xs_0", "xs_1" for the
    leaves of a container argument)."""
    index_args, index_kwargs = arg_def.unflatten([ArgsIndex(i) for i in range(count)])
    try:
        bound = inspect.getcallargs(forward, *index_args, **index_kwargs)
    except TypeError:
        return {}
    names = {}
    for key, value in bound.items():
        if isinstance(value, ArgsIndex):
            names[value.index] = key
            continue
        flat, _ = tree_flatten(value, is_leaf=lambda x: True)
        for i, v in enumerate(x for x in flat if isinstance(x, ArgsIndex)):
            names[v.index] = f"{key}_{i}"
    return names
