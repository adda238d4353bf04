"""Network nodes <-> megtrace IR graphs: `adopt` shows a graph as nodes, `to_graph` turns
nodes back into a graph for the writer and the optimizer, `retype` re-infers types."""
from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from ..errors import ShapeError
from ..ir import Graph, TensorType, Var
from ..ops import get
from .network_node import (ConstOpBase, Host2DeviceCopy, ImmutableTensor, OpNode, VarNode,
                           make_opnode)

ASTYPE = get("astype")


def topo_order(outputs: Sequence[VarNode]) -> list[OpNode]:
    """Every operator `outputs` depend on, inputs first; among the ready ones the one
    made first (so a loaded model keeps its file's order)."""
    found: dict[int, OpNode] = {}
    stack = [v.owner for v in outputs]
    while stack:
        opr = stack.pop()
        if opr is None or opr.id in found:
            continue
        found[opr.id] = opr
        stack.extend(v.owner for v in opr.inputs)
    waiting = {k: len({id(v.owner) for v in o.inputs}) for k, o in found.items()}
    users: dict[int, list[OpNode]] = {}
    for o in found.values():
        for pid in {id(v.owner) for v in o.inputs}:
            users.setdefault(pid, []).append(o)
    ready = [(o.priority, k, o) for k, o in found.items() if waiting[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k, opr = heapq.heappop(ready)
        order.append(opr)
        for u in users.get(k, []):
            waiting[u.id] -= 1
            if waiting[u.id] == 0:
                heapq.heappush(ready, (u.priority, u.id, u))
    if len(order) != len(found):
        raise ValueError("the network has a cycle: an operator depends on its own output")
    return order


def input_types(opr: OpNode) -> list[TensorType]:
    """The types `opr` computes on: its inputs' types, except that MegEngine's graph
    Elemwise converts mixed integer/float inputs to the one float dtype among them (a
    float constant put in place of an int32 input makes the ADD float32)."""
    types = [v._var.type for v in opr.inputs]
    dtypes = {t.dtype for t in types}
    floats = {d for d in dtypes if np.dtype(d).kind == "f"}
    if opr.type == "Elemwise" and len(dtypes) > 1 and len(floats) == 1 and \
            all(np.dtype(d).kind in "iuf" for d in dtypes):
        (dtype,) = floats
        return [TensorType(t.shape, dtype) for t in types]
    return types


def retype(opr: OpNode) -> None:
    """Give the outputs of `opr` the types its op's shape rule gives for its inputs now."""
    types = input_types(opr)
    try:
        new = opr.op.infer_types(types, opr.kwargs)
    except Exception as e:  # noqa: BLE001  (a rule's error names the op and shapes)
        raise ShapeError(f"{opr.name} ({opr.type}): its inputs "
                         f"{[str(t) for t in types]} no longer fit: {e}") from e
    for out, t in zip(opr.outputs, new):
        old = out._var.type
        if opr.op.value_shaped and old.dtype == t.dtype and old.ndim == t.ndim and \
                all(a <= b for a, b in zip(old.shape, t.shape)):
            continue            # a recorded shape within the rule's bound
        out._set_type(t)


def adopt(graph: Graph, var_names: dict[Var, str] | None = None,
          nodes: dict[Var, VarNode] | None = None) -> list[VarNode]:
    """Nodes for an IR graph (inputs, constants and nodes in the graph's order); returns
    its outputs as VarNodes named as the graph names them. `var_names` names vars (the
    file's names); an operator without a name of its own is named after its output.
    `nodes`, when given, receives the VarNode made for each var of the graph."""
    var_names = var_names or {}
    nodes = {} if nodes is None else nodes
    for var, name in zip(graph.inputs, graph.input_names):
        nodes[var] = Host2DeviceCopy(var.type.shape, var.type.np_dtype, name).outputs[0]

    def node_of(var: Var) -> VarNode:
        if var not in nodes:
            if var not in graph.consts:
                raise ValueError(f"adopt: {var} is not defined in the graph")
            name = var.name_hint or var_names.get(var) or None
            nodes[var] = ImmutableTensor(graph.consts[var], name).outputs[0]
            nodes[var].name = var_names.get(var, name or "")
        return nodes[var]

    for node in graph.nodes:
        ins = [node_of(v) for v in node.inputs]
        name = node.outputs[0].name_hint.split(":o")[0] or None
        opr = make_opnode(node.op, node.kwargs, ins, node.outputs, name)
        for v, out in zip(node.outputs, opr.outputs):
            nodes[v] = out
            out.name = var_names.get(v, out.name)
    outs = [node_of(v) for v in graph.outputs]
    for out, name in zip(outs, graph.output_names):
        out.name = name
    return outs


def to_graph(outputs: Sequence[VarNode], names: Sequence[str]) -> Graph:
    """The IR graph computing `outputs` (named `names`): what the writer and the
    optimizer take. Every node is re-typed and constant-folded as it is added."""
    g = Graph()
    env: dict[int, Var] = {}
    seen_inputs: dict[str, OpNode] = {}
    for opr in topo_order(outputs):
        if isinstance(opr, Host2DeviceCopy):
            name = opr.name or opr.outputs[0].name
            if not name:
                raise ValueError("Network.dump: an input (Host2DeviceCopy) has no name")
            if name in seen_inputs:
                raise ValueError(f"Network.dump: two inputs are named {name!r}; rename one "
                                 "(their names are the model's input names)")
            seen_inputs[name] = opr
            env[id(opr.outputs[0])] = g.add_input(opr.outputs[0]._var.type, name)
        elif isinstance(opr, ConstOpBase):
            env[id(opr.outputs[0])] = g.add_const(opr.numpy(), opr.name or "")
        elif opr.op is None:
            raise ValueError(f"Network.dump: operator {opr} has nothing megtrace can run")
        else:
            ins = [env[id(v)] for v in opr.inputs]
            ins = [x if x.type.dtype == t.dtype else
                   g.add_node(ASTYPE, [x], {"dtype": t.dtype}, opr.name or "")[0]
                   for x, t in zip(ins, input_types(opr))]
            kept = [v._var.type for v in opr.outputs] if opr.op.value_shaped else None
            outs = g.add_node(opr.op, ins, opr.kwargs, opr.name or "", out_types=kept)
            for v, var in zip(opr.outputs, outs):
                env[id(v)] = var
    g.set_outputs([env[id(v)] for v in outputs], list(names))
    return g


def clone_with(dst: Sequence[VarNode], replacement) -> list[VarNode]:
    """New vars for `dst` where each var for which `replacement(var)` gives a VarNode is
    read as that one; operators whose inputs change are copied, the rest are kept."""
    new: dict[int, VarNode] = {}

    def now(v: VarNode) -> VarNode:
        if id(v) not in new:
            r = replacement(v)
            new[id(v)] = r if r is not None else v
        return new[id(v)]

    for opr in topo_order(dst):
        if opr.op is None:
            continue
        ins = [now(i) for i in opr.inputs]
        if all(a is b for a, b in zip(ins, opr.inputs)):
            continue
        copy = make_opnode(opr.op, opr.kwargs, ins,
                           [Var(o._var.type, o._var.name_hint) for o in opr.outputs], opr.name)
        retype(copy)
        for old, out in zip(opr.outputs, copy.outputs):
            out.name = old.name
            r = replacement(old)
            new[id(old)] = r if r is not None else out
    return [now(v) for v in dst]


def refold(old: Graph, new: Graph, nodes: dict[Var, VarNode]) -> dict[Var, VarNode] | None:
    """Carry what changed from `old` to `new`, the same file built for other input
    shapes, into the nodes made from `old` (`nodes`, from adopt): op params (a Reshape's
    folded target shape) and constants whose values follow the shapes. None, changing
    nothing, when the two graphs differ in structure. Returns `nodes` keyed by `new`'s vars."""
    if len(old.nodes) != len(new.nodes) or len(old.consts) != len(new.consts) or any(
            a.op is not b.op or len(a.inputs) != len(b.inputs) or len(a.outputs) != len(b.outputs)
            for a, b in zip(old.nodes, new.nodes)):
        return None
    for (va, xa), (vb, xb) in zip(old.consts.items(), new.consts.items()):
        node = nodes.get(va)
        if node is not None and (xa.shape != xb.shape or xa.dtype != xb.dtype or
                                 not np.array_equal(xa, xb)):
            node.owner.set_value(xb)
    for a, b in zip(old.nodes, new.nodes):
        node = nodes.get(a.outputs[0])
        if node is not None and a.params != b.params:
            node.owner.set_kwargs(b.kwargs, [v.type for v in b.inputs])
    moved = dict(zip(old.inputs, new.inputs))
    moved.update(zip(old.consts, new.consts))
    for a, b in zip(old.nodes, new.nodes):
        moved.update(zip(a.outputs, b.outputs))
    return {moved[v]: n for v, n in nodes.items() if v in moved}
