"""The arithmetic simplifications MegEngine's graph optimizer makes at opt_level >= 1,
observed on MegEngine 1.13 (tests/data/arith_simplify_megengine.py prints them):

- y / y -> 1 and y - y -> 0 when y is computed inside the graph (an input divided by
  itself is kept, as MegEngine keeps it);
- x * 0 -> 0 (NaN and inf included), x + 0, x - 0, x * 1, x / 1 -> x;
- log(exp(x)) -> x, log(exp(a) * exp(b)) -> a + b, log(exp(a) / exp(b)) -> a - b,
  log(exp(a) + exp(b)) -> logaddexp(a, b) (stable), log(1 + x) -> log1p(x),
  exp(x) - 1 -> expm1(x).

They change results only where the unsimplified graph overflows or loses precision,
which is why MegEngine's tests check them. Rules fire only when the result keeps the
node's type (no broadcasting hidden by dropping an operand).
"""
from __future__ import annotations

import numpy as np

from ..errors import MegtraceError
from ..ir import Graph, Node, Var
from ..ops import get


class _View:
    """What a rule needs to know about the graph being built."""

    def __init__(self, new: Graph):
        self.new = new
        self._producers: dict[Var, Node] = {}
        self._seen = 0

    def producer(self, var: Var) -> Node | None:
        nodes = self.new.nodes
        for node in nodes[self._seen:]:
            for v in node.outputs:
                self._producers[v] = node
        self._seen = len(nodes)
        return self._producers.get(var)

    def made_by(self, var: Var, name: str) -> Node | None:
        node = self.producer(var)
        return node if node is not None and node.op.name == name else None

    def scalar(self, var: Var, value: float) -> bool:
        array = self.new.consts.get(var)
        return array is not None and array.size == 1 and bool(np.all(array == value))

    def internal(self, var: Var) -> bool:
        return self.producer(var) is not None


def _filled(view: _View, node: Node, value: float) -> tuple[Var, ...]:
    """`value` in the node's type: a scalar constant broadcast (folded when small)."""
    out = node.outputs[0]
    scalar = view.new.add_const(np.array(value, out.type.dtype), out.name_hint)
    if not out.type.shape:
        return (scalar,)
    return view.new.add_node(get("broadcast_to"), [scalar], {"shape": out.type.shape},
                             out.name_hint)


def _op(view: _View, name: str, inputs: list[Var], node: Node) -> tuple[Var, ...] | None:
    """The replacement node, or None when its type differs or its op refuses the operands
    (a dtype it does not take): the original node is then kept."""
    try:
        outs = view.new.add_node(get(name), inputs, {}, node.outputs[0].name_hint)
    except MegtraceError:
        return None
    return outs if outs[0].type == node.outputs[0].type else None


def _identity(view: _View, node: Node, a: Var, b: Var, neutral: float, commutes: bool):
    for keep, other in ((a, b), (b, a)) if commutes else ((a, b),):
        if view.scalar(other, neutral) and keep.type == node.outputs[0].type:
            return (keep,)
    return None


def _simplify_log(view: _View, node: Node, x: Var):
    inner = view.producer(x)
    if inner is None:
        return None
    name = inner.op.name
    if name == "exp":
        return (inner.inputs[0],) if inner.inputs[0].type == node.outputs[0].type else None
    if name in ("add", "mul", "div"):
        a, b = inner.inputs
        ea, eb = view.made_by(a, "exp"), view.made_by(b, "exp")
        if ea is not None and eb is not None:
            combined = {"add": "logaddexp", "mul": "add", "div": "sub"}[name]
            return _op(view, combined, [ea.inputs[0], eb.inputs[0]], node)
        if name == "add":
            for one, rest in ((a, b), (b, a)):
                if view.scalar(one, 1.0) and rest.type == node.outputs[0].type:
                    return _op(view, "log1p", [rest], node)
    return None


def _rule(node: Node, ins: list[Var], view: _View):
    name = node.op.name
    if name in ("div", "sub") and ins[0] is ins[1] and view.internal(ins[0]) and \
            node.outputs[0].type == ins[0].type:
        return _filled(view, node, 1.0 if name == "div" else 0.0)
    if name == "mul":
        if any(view.scalar(v, 0.0) for v in ins):
            return _filled(view, node, 0.0)
        return _identity(view, node, ins[0], ins[1], 1.0, commutes=True)
    if name == "add":
        return _identity(view, node, ins[0], ins[1], 0.0, commutes=True)
    if name == "div":
        return _identity(view, node, ins[0], ins[1], 1.0, commutes=False)
    if name == "sub":
        e = view.made_by(ins[0], "exp")
        if e is not None and view.scalar(ins[1], 1.0) and e.outputs[0].type == node.outputs[0].type:
            return _op(view, "expm1", [e.inputs[0]], node)
        return _identity(view, node, ins[0], ins[1], 0.0, commutes=False)
    if name == "log":
        return _simplify_log(view, node, ins[0])
    return None


def simplify_arith(graph: Graph) -> Graph:
    """A copy of `graph` with MegEngine's opt_level>=1 simplifications applied (the
    outputs keep their order; values computed by removed nodes are pruned)."""
    views: dict[int, _View] = {}

    def rule(node, ins, new, remap):
        view = views.setdefault(id(new), _View(new))
        return _rule(node, ins, view)
    return graph.rewrite(rule)
