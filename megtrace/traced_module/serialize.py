"""A TracedModule's graphs as plain data (lists, dicts, strings, numbers, dtypes, tensors,
modules), so that pickling needs no graph classes and megtrace.load's safe unpickler can
rebuild it; functions are named, and only builtin ones (megtrace's, or registered with
`wrap`) are looked up again."""
from __future__ import annotations

import sys
import weakref
from collections import OrderedDict, defaultdict
from typing import Any, Callable

from ..module.module import Module
from .expr import Apply, CallFunction, CallMethod, Constant, Expr, GetAttr, Input
from .node import ModuleNode, Node, TensorNode
from .pytree import SUPPORTED_TYPE, LeafDef, TreeDef

_CONTAINERS = {list: "list", tuple: "tuple", dict: "dict", OrderedDict: "OrderedDict",
               defaultdict: "defaultdict", slice: "slice"}
_CONTAINER_BY_NAME = {v: k for k, v in _CONTAINERS.items()}
_ELLIPSIS = {"__traced_module_const__": "Ellipsis"}

# functions registered with traced_module.wrap: (module, qualname)
USER_REGISTERED_FUNCTION: list[tuple[str, str]] = []


def _lookup(module: str, qualname: str):
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _encode_const(value):
    return _ELLIPSIS if value is Ellipsis else value


def _decode_const(value):
    return Ellipsis if value == _ELLIPSIS else value


def treedef_state(tree: TreeDef):
    if tree is None:
        return None
    if isinstance(tree, LeafDef):
        return ("leaf", tree.kind, _encode_const(tree.const_val))
    name = _CONTAINERS.get(tree.type) or (tree.type.__module__, tree.type.__qualname__)
    return (name, tree.aux_data, [treedef_state(c) for c in tree.children_defs])


def treedef_from_state(state):
    if state is None:
        return None
    if state[0] == "leaf":
        return LeafDef(state[1], _decode_const(state[2]))
    name, aux, children = state
    tp = _CONTAINER_BY_NAME.get(name) if isinstance(name, str) else _lookup(*name)
    if tp not in SUPPORTED_TYPE:
        raise TypeError(f"the traced module needs container type {name}, which is not "
                        "registered (register_supported_type)")
    return TreeDef(tp, aux, [treedef_from_state(c) for c in children])


def _type_name(tp: type) -> tuple[str, str]:
    return tp.__module__, tp.__qualname__


def _node_state(node: Node) -> dict:
    state = {"name": node._name, "qualname": node._qualname, "id": node._id}
    if isinstance(node, ModuleNode):
        state["module_type"] = _type_name(node.module_type)
    else:
        state["shape"], state["dtype"] = node.shape, node.dtype
    return state


def _node_from_state(state: dict) -> Node:
    if "module_type" in state:
        tp = _lookup(*state["module_type"])
        node = ModuleNode(None, state["name"], state["qualname"],
                          module_type=tp if isinstance(tp, type) else Module)
    else:
        node = TensorNode(None, state["name"], state["qualname"], shape=state["shape"],
                          dtype=state["dtype"])
    node._id = state.get("id", -1)
    return node


def _expr_state(expr: Expr, index: Callable[[Node], int]) -> dict:
    state = {"kind": type(expr).__name__, "inputs": [index(n) for n in expr.inputs],
             "outputs": [index(n) for n in expr.outputs],
             "const_val": [(i, _encode_const(v)) for i, v in expr.const_val],
             "arg_def": treedef_state(expr.arg_def), "out_def": treedef_state(expr.out_def),
             "keep": expr._disable_remove, "id": expr._id}
    if isinstance(expr, (Input, Constant, GetAttr)):
        state["name"] = expr.name
    if isinstance(expr, Constant):
        state["value"] = expr.value
    elif isinstance(expr, CallMethod):
        state["method"] = expr.method
    elif isinstance(expr, CallFunction):
        state["func"] = (expr.func.__module__, expr.func.__qualname__)
    elif isinstance(expr, Apply):
        state["opdef"], state["params"] = expr.opdef, expr.params
    return state


def _builtin_function(name: tuple[str, str]) -> Callable:
    module, qualname = name
    if not (module.startswith("megtrace.") or tuple(name) in USER_REGISTERED_FUNCTION):
        raise TypeError(f"the traced module calls {module}.{qualname}, which is neither a "
                        "megtrace function nor registered with traced_module.wrap")
    func = _lookup(module, qualname)
    if not callable(func):
        raise TypeError(f"the traced module calls {module}.{qualname}, which is not loaded; "
                        "import its module first")
    return func


def _expr_from_state(state: dict, nodes: list[Node]) -> Expr:
    kind = state["kind"]
    outs = [nodes[i] for i in state["outputs"]]
    if kind == "Input":
        expr = Input.__new__(Input)
        Expr.__init__(expr)
        expr.name = state["name"]
    elif kind == "Constant":
        expr = Constant(state["value"], outs[0], state["name"])
    elif kind == "GetAttr":
        expr = GetAttr(nodes[state["inputs"][0]], state["name"], outs[0])
    elif kind == "CallMethod":
        expr = CallMethod(state["method"])
    elif kind == "CallFunction":
        expr = CallFunction(_builtin_function(state["func"]))
    elif kind == "Apply":
        expr = Apply(state["opdef"], state["params"])
    else:
        raise TypeError(f"unknown expr kind {kind!r} in a traced module")
    if kind not in ("GetAttr",):
        for i in state["inputs"]:
            expr.add_input(nodes[i])
    expr.outputs = outs
    for node in outs:
        node.expr = expr
    expr.const_val = [(i, _decode_const(v)) for i, v in state["const_val"]]
    expr.arg_def = treedef_from_state(state["arg_def"])
    expr.out_def = treedef_from_state(state["out_def"])
    expr._disable_remove = state["keep"]
    expr._id = state.get("id", -1)
    return expr


def graph_state(graph, expr_state: Callable = None, node_state: Callable = None) -> dict:
    """The plain state of an InternalGraph (or of a MegEngine pickle's record of one, with
    its own `expr_state(expr, index)` / `node_state(node)`): nodes numbered as met."""
    expr_state = expr_state or _expr_state
    node_state = node_state or _node_state
    order: dict[int, int] = {}
    nodes: list[Node] = []

    def index(node: Node) -> int:
        if id(node) not in order:
            order[id(node)] = len(nodes)
            nodes.append(node)
        return order[id(node)]

    inputs = [index(n) for n in graph._inputs]
    input_exprs = [expr_state(n.expr, index) for n in graph._inputs]
    exprs = [expr_state(e, index) for e in graph._exprs]
    outputs = [index(n) for n in graph._outputs]
    return {"name": graph._name, "qualname": graph._qualname, "inputs": inputs,
            "input_exprs": input_exprs, "exprs": exprs, "outputs": outputs,
            "nodes": [node_state(n) for n in nodes]}


def graph_from_state(state: dict, new_graph: Callable[[str, str], Any]):
    graph = new_graph(state["name"], state["qualname"])
    nodes = [_node_from_state(s) for s in state["nodes"]]
    for s in state["input_exprs"]:
        expr = _expr_from_state(s, nodes)
        graph._own(expr)
    graph._inputs = [nodes[i] for i in state["inputs"]]
    for s in state["exprs"]:
        expr = _expr_from_state(s, nodes)
        graph._own(expr)
        graph._exprs.append(expr)
    graph._outputs = [nodes[i] for i in state["outputs"]]
    for node in nodes:
        node._top_graph = weakref.ref(graph)
        node._name = graph._namespace.create_unique_name(node._name or "_", node)
    return graph
