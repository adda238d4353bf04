"""Exprs: the operations of a traced graph (MegEngine's Input, Constant, GetAttr,
CallMethod, CallFunction, Apply), each able to `interpret` itself on concrete values."""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Iterable, Optional

from ..module.module import Module
from ..tensor import Tensor
from .node import ModuleNode, Node, TensorNode
from .pytree import TreeDef, tree_flatten
from .utils import convert_kwargs_to_args


class Expr:
    """One operation: reads `inputs` (nodes), makes `outputs` (nodes). Non-node arguments
    are `const_val` ((position, value) pairs); `arg_def` rebuilds (args, kwargs)."""

    _next_id = 0     # MegEngine's id counter; graphs number new exprs from their _total_ids

    @classmethod
    def _get_next_id(cls) -> int:
        return cls._next_id

    @classmethod
    def _set_next_id(cls, value: int) -> None:
        cls._next_id = int(value)

    def __init__(self):
        self._id = -1
        self.inputs: list[Node] = []
        self.outputs: list[Node] = []
        self.const_val: list[tuple[int, Any]] = []
        self.arg_def: Optional[TreeDef] = None
        self.out_def: Optional[TreeDef] = None
        self._top_graph: Optional[weakref.ReferenceType] = None
        self._disable_remove = False

    # -- structure ----------------------------------------------------------------------
    def add_input(self, node: Node) -> None:
        self.inputs.append(node)
        node.users.append(self)

    def set_args(self, leaves: list, nodes: list) -> None:
        """`leaves` are the flattened arguments, `nodes[i]` the node of leaf i or None for a
        constant."""
        for idx, (leaf, node) in enumerate(zip(leaves, nodes)):
            if node is None:
                self.const_val.append((idx, leaf))
            else:
                self.add_input(node)

    def unflatten_args(self, inputs) -> tuple[tuple, dict]:
        if self.arg_def is None:
            raise AssertionError(f"{type(self).__name__} expr doesn't have args/kwargs")
        values = list(inputs)
        for idx, val in self.const_val:
            values.insert(idx, val)
        return self.arg_def.unflatten(values)

    @property
    def args(self) -> tuple:
        """The positional arguments, with nodes where the operation reads variables."""
        return self.unflatten_args(self.inputs)[0]

    @property
    def kwargs(self) -> dict:
        """The keyword arguments, with nodes where the operation reads variables."""
        return self.unflatten_args(self.inputs)[1]

    # -- changing arguments (CallFunction, CallMethod) -----------------------------------
    @property
    def _support_set_args_kwargs(self) -> bool:
        return False

    def _get_func(self) -> Callable:
        raise NotImplementedError

    def set_args_kwargs(self, *args, **kwargs) -> None:
        """Call with these arguments instead (nodes where it should read variables)."""
        if not self._support_set_args_kwargs:
            raise AssertionError(
                f"Doesn't support set args/kwargs for {type(self).__name__} expr")
        args, kwargs = convert_kwargs_to_args(self._get_func(), args, kwargs)
        leaves, arg_def = tree_flatten((args, kwargs))
        old = list(self.inputs)
        for node in old:
            node.users.remove(self)
        self.inputs, self.const_val = [], []
        self.set_args(leaves, [x if isinstance(x, Node) else None for x in leaves])
        self.arg_def = arg_def

    @property
    def named_args(self) -> dict:
        """The arguments by parameter name."""
        return inspect.getcallargs(self._get_func(), *self.args, **self.kwargs)

    def set_arg(self, name: str, val) -> None:
        """Change one argument, by parameter name."""
        func = self._get_func()
        args, kwargs = list(self.args), self.kwargs
        spec = inspect.getfullargspec(inspect.unwrap(func))
        if name in kwargs:
            kwargs[name] = val
        elif name in spec.args:
            args[spec.args.index(name)] = val
        elif name == spec.varargs:
            args = args[:len(spec.args)] + list(val if isinstance(val, (list, tuple))
                                                else (val,))
        elif spec.varkw is not None:
            kwargs[name] = val
        else:
            raise AssertionError(f"func {func} does't have argument named {name}")
        self.set_args_kwargs(*args, **kwargs)

    @property
    def return_val(self):
        return self.out_def.unflatten(self.outputs) if self.out_def else self.outputs

    @return_val.setter
    def return_val(self, value) -> None:
        """Make the nodes in `value` (possibly nested) this expr's results (MegEngine's
        way to build an expr by hand, e.g. in a serialization loader)."""
        outputs, self.out_def = tree_flatten(value, is_leaf=lambda x: isinstance(x, Node))
        self.outputs = list(outputs)
        for node in self.outputs:
            node.expr = self

    @property
    def top_graph(self):
        """The graph this expr belongs to."""
        return self._top_graph() if self._top_graph is not None else None

    def enable_remove(self) -> None:
        self._disable_remove = False

    def disable_remove(self) -> None:
        """Keep this expr when `graph.compile()` drops exprs the outputs do not need."""
        self._disable_remove = True

    def replace_inputs(self, repl_dict: dict[Node, Node]) -> None:
        """Read `repl_dict[old]` where this expr read `old`; the new node must be made
        earlier in the same graph."""
        graph = self.top_graph
        for node, repl in list(repl_dict.items()):
            if type(node) is not type(repl):
                raise AssertionError(f"The type of {node} and {repl} are not the same")
            if node not in self.inputs:
                raise AssertionError(f"({node}) is not in the ({self})")
            if repl.top_graph is not node.top_graph:
                raise AssertionError(f"({node}) and ({repl}) are not in the same graph")
            if graph is not None and repl.expr in graph._exprs and \
                    graph._exprs.index(repl.expr) >= graph._exprs.index(self):
                raise AssertionError(f"({repl}) must be generated before ({self})")
            for i, n in enumerate(self.inputs):
                if n is node:
                    self.inputs[i] = repl
                    node.users.remove(self)
                    repl.users.append(self)

    def interpret(self, *inputs) -> Optional[list]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"%{self._id}:\t{type(self).__name__}"


def _flat_outputs(outputs) -> Optional[list]:
    if outputs is None:
        return None
    leaves, _ = tree_flatten(outputs, is_leaf=lambda x: isinstance(x, (Tensor, int)))
    return leaves


class Input(Expr):
    """The graph input named `name` (a fake expr marking where a node comes from)."""

    def __init__(self, node_cls: type, name: str, qualname: str, **node_kwargs):
        super().__init__()
        self.name = name
        self.outputs = [node_cls(self, name=name, qualname=qualname, **node_kwargs)]

    def __repr__(self) -> str:
        return f"%{self._id}:\t{self.outputs[0]} = Input()"


class Constant(Expr):
    """A Tensor or Module that is no attribute of the traced module: kept by value."""

    def __init__(self, value, node: Any = None, name: str = "", qualname: str = ""):
        super().__init__()
        if not isinstance(node, Node):      # MegEngine's Constant(value, name, qualname)
            name = node or name or ""
            node = TensorNode(self, name, qualname) if isinstance(value, Tensor) else \
                ModuleNode(self, name, qualname, module_type=type(value))
            if isinstance(value, Tensor):
                node.shape, node.dtype = tuple(value.shape), value.dtype
        self.value = value
        self.name = name
        node.expr = self
        self.outputs = [node]

    def interpret(self, *inputs):
        if isinstance(self.value, Tensor):
            # each run gets its own tensor: in-place updates must not change the constant
            return [Tensor(self.value.numpy().copy(), dtype=self.value.dtype,
                           device=self.value.device)]
        return [self.value]

    def __repr__(self) -> str:
        kind = "Tensor" if isinstance(self.outputs[0], TensorNode) else "Module"
        name = self.name if self.name else type(self.value)
        return f"%{self._id}:\t{self.outputs[0]} = Constant({name}) -> ({kind})"


def _get_attr_path(obj, path: str):
    for part in path.split("."):
        if isinstance(obj, (list, tuple)):
            obj = obj[int(part)]
        elif isinstance(obj, dict):
            obj = obj[part] if part in obj else obj[int(part)]
        else:
            obj = getattr(obj, part)
    return obj


class GetAttr(Expr):
    """Fetch attribute `name` (dotted: through submodules and containers) of a module."""

    def __init__(self, module: ModuleNode, name: str, node: Node):
        super().__init__()
        if not isinstance(module, ModuleNode):
            raise AssertionError("GetAttr reads an attribute of a ModuleNode")
        self.add_input(module)
        self.name = name
        node.expr = self
        self.outputs = [node]

    def interpret(self, *inputs):
        return [_get_attr_path(inputs[0], self.name)]

    def __repr__(self) -> str:
        out = self.outputs[0]
        kind = out.module_type.__name__ if isinstance(out, ModuleNode) else "Tensor"
        return f'%{self._id}:\t{out} = getattr({self.inputs[0]}, "{self.name}") -> ({kind})'


def _format_call(expr: Expr, args: Iterable, kwargs: dict) -> str:
    a = ", ".join(str(i) for i in args)
    k = ", ".join(f"{key}={val}" for key, val in kwargs.items())
    return ", ".join([a, k])


class CallMethod(Expr):
    """`obj.method(...)`: a module's __call__ (inputs[0] a ModuleNode) or a Tensor method.
    `CallMethod(node, method)` (MegEngine's form) calls `method` on `node`; set the
    arguments with `set_args_kwargs` and the results with `return_val`."""

    def __init__(self, node: Any = "__call__", method: str = "__call__"):
        super().__init__()
        if isinstance(node, str):           # CallMethod(method): filled by the tracer
            self.method = node
            return
        if not isinstance(node, Node):
            raise AssertionError(f"CallMethod: expects a TensorNode or ModuleNode; got {node!r}")
        self.method = method
        self.add_input(node)
        self.arg_def = tree_flatten(((node,), {}), is_leaf=lambda x: isinstance(x, Node))[1]

    @property
    def graph(self):
        """The graph a called TracedModule runs for these arguments (None otherwise)."""
        if isinstance(self.inputs[0], ModuleNode):
            owner = self.inputs[0].owner
            graphs = getattr(owner, "argdef_graph_map", None)
            if graphs:
                return graphs[self.arg_def]
        return None

    def interpret(self, *inputs):
        args, kwargs = self.unflatten_args(inputs)
        obj = args[0]
        outputs = getattr(obj, self.method)(*args[1:], **kwargs)
        if self.method == "__setitem__":
            outputs = obj
        return _flat_outputs(outputs)

    def _get_func(self) -> Callable:
        head = self.inputs[0]
        if isinstance(head, ModuleNode):
            return head.module_type.forward
        return getattr(Tensor, self.method)

    @property
    def _support_set_args_kwargs(self) -> bool:
        head = self.inputs[0]
        return not isinstance(head, ModuleNode) or head.module_type is not Module

    def __repr__(self) -> str:
        args, kwargs = self.args, self.kwargs
        out = self.return_val if self.outputs else None
        method = "" if self.method == "__call__" else f".{self.method}"
        res = f"{out} = " if self.outputs else ""
        return f"%{self._id}:\t{res}{args[0]}{method}({_format_call(self, args[1:], kwargs)})"


class CallFunction(Expr):
    """A call of a builtin function (megtrace.functional, or one registered with `wrap`)."""

    def __init__(self, func: Callable):
        super().__init__()
        if not callable(func):
            raise AssertionError("CallFunction needs a callable")
        self.func = func

    def interpret(self, *inputs):
        args, kwargs = self.unflatten_args(inputs)
        return _flat_outputs(self.func(*args, **kwargs))

    def _get_func(self) -> Callable:
        return self.func

    @property
    def _support_set_args_kwargs(self) -> bool:
        return True

    def __repr__(self) -> str:
        out = self.return_val if self.outputs else None
        res = f"{out} = " if self.outputs else ""
        name = self.func.__module__.rsplit(".")[-1] + "." + self.func.__name__
        return f"%{self._id}:\t{res}{name}({_format_call(self, self.args, self.kwargs)})"


class Apply(Expr):
    """A registry operator applied directly (an op no patched function recorded)."""

    def __init__(self, op_name: str, params: dict):
        super().__init__()
        self.opdef = op_name
        self.params = dict(params)

    def interpret(self, *inputs):
        from ..dispatch import apply
        outs = apply(self.opdef, *inputs, **self.params)
        return list(outs) if isinstance(outs, tuple) else [outs]

    def __repr__(self) -> str:
        outs = ", ".join(str(o) for o in self.outputs)
        ins = ", ".join(str(i) for i in self.inputs)
        return f"%{self._id}:\t{outs} = {self.opdef}({ins})"


def is_call_module(expr, module_cls: type | None = None) -> bool:
    return isinstance(expr, CallMethod) and isinstance(expr.inputs[0], ModuleNode) and \
        expr.method == "__call__" and \
        (module_cls is None or issubclass(expr.inputs[0].module_type, module_cls))


def is_call_tensor_method(expr, method=None) -> bool:
    if isinstance(method, str):
        method = (method,)
    return isinstance(expr, CallMethod) and not is_call_module(expr) and \
        (method is None or expr.method in method)


def is_call_function(expr, func=None) -> bool:
    if func is not None and not isinstance(func, Iterable):
        func = (func,)
    return isinstance(expr, CallFunction) and (func is None or any(
        _same_function(expr.func, f) for f in func))


def _same_function(a: Callable, b: Callable) -> bool:
    """Patched and original functions compare equal (users pass F.relu while tracing is
    over, or from inside a trace)."""
    unwrap = lambda f: getattr(f, "__wrapped__", f)  # noqa: E731
    return unwrap(a) is unwrap(b)


def is_constant(expr) -> bool:
    return isinstance(expr, Constant)


def is_getattr(expr) -> bool:
    return isinstance(expr, GetAttr)


def is_apply_def(expr, opdef=None) -> bool:
    return isinstance(expr, Apply) and (opdef is None or expr.opdef == opdef)


def is_input(expr) -> bool:
    return isinstance(expr, Input)
