"""Which graph nodes the CPU rules take, and which elementwise ops ride along.

An anchor is a node a hand rule computes: conv2d (groups 1) or MegEngine's conv_bias,
depthwise conv2d, a matmul whose right operand is a 2-d constant (dense), or any other
float32 matmul. From each anchor the plan follows its result through single-use
elementwise ops (bias add, batch norm with constant statistics, ReLU/clip, a residual
add with a tensor of the same shape) and folds them into the anchor's epilogue, so
they cost nothing extra. The plan reads only the megtrace
Graph; lower.py turns it into Relax.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from megtrace.ir import Graph, Node, Var

from .epilogue import BINARY_OPS, UNARY_OPS, Epilogue, Operand, Step, channel_operand

F32 = "float32"


@dataclass(eq=False)
class Group:
    """An anchor and the nodes folded into its epilogue (in order)."""

    kind: str                    # "conv", "depthwise", "dense" or "matmul"
    anchor: Node
    chain: list[Node] = field(default_factory=list)
    epilogue: Epilogue = field(default_factory=Epilogue)

    @property
    def nodes(self) -> list[Node]:
        return [self.anchor, *self.chain]

    @property
    def out(self) -> Var:
        return self.nodes[-1].outputs[0]


def anchor_kind(node: Node, graph: Graph) -> str | None:
    """The rule that computes `node`, or None for the default path."""
    name = node.op.name
    if any(v.type.size == 0 for v in (*node.inputs, *node.outputs)):
        return None                       # nothing to compute: leave it to TVM
    if name in ("conv2d", "conv_bias"):
        x, w = (v.type for v in node.inputs[:2])
        p = node.kwargs
        if name == "conv_bias" and anchor_steps(node, graph) is None:
            return None
        if x.dtype != F32 or w.dtype != F32 or tuple(p["dilation"]) != (1, 1):
            return None
        if w.ndim == 4:
            return "conv"
        c = x.shape[1]
        if w.ndim == 5 and w.shape[:3] == (c, 1, 1):
            return "depthwise"
        return None
    if name == "matmul":
        a, b = node.inputs
        if a.type.dtype != F32 or b.type.dtype != F32 or a.type.ndim < 2 or b.type.ndim < 2:
            return None
        if not node.kwargs["transpose_a"] and b in graph.consts and b.type.ndim == 2:
            return "dense"
        return "matmul"
    return None


_NONLINE = {"IDENTITY": [], "RELU": [Step("relu")], "SIGMOID": [Step("sigmoid")]}


def anchor_steps(node: Node, graph: Graph) -> list[Step] | None:
    """Epilogue steps an anchor brings itself: MegEngine's ConvBias (`conv_bias`, as in
    optimized .mge files) is a conv with its bias add and nonlinearity."""
    if node.op.name != "conv_bias":
        return []
    bias, out = node.inputs[2], node.outputs[0].type
    operand = _operand(bias, graph, out.shape, 1)
    nonline = _NONLINE.get(node.kwargs.get("nonline"))
    if operand is None or nonline is None:
        return None
    return [Step("add", operand), *nonline]


# MegEngine's fused Elemwise modes (optimize_for_inference): (binary op, then unary op).
_FUSED = {"fuse_add_relu": ("add", "relu"), "fuse_add_sigmoid": ("add", "sigmoid"),
          "fuse_add_tanh": ("add", "tanh")}


def elementwise_steps(node: Node, value: Var, graph: Graph, axis: int) -> list[Step] | None:
    """`node` as epilogue steps applied to `value` (one of its inputs), or None when it
    does not fit: it must keep `value`'s type, and its other inputs must be scalars,
    per-channel constants along `axis`, or runtime tensors of the same type."""
    out = node.outputs[0].type
    if out != value.type or out.dtype != F32:
        return None
    name = node.op.name
    if name in UNARY_OPS:
        return [Step(name)] if node.inputs[0] is value else None
    if name in BINARY_OPS or name in _FUSED:
        a, b = node.inputs
        if (a is value) == (b is value):
            return None
        other = b if a is value else a
        operand = _operand(other, graph, out.shape, axis)
        if operand is None:
            return None
        if name in _FUSED:
            binary, unary = _FUSED[name]
            return [Step(binary, operand, a is value), Step(unary)]
        return [Step(name, operand, a is value)]
    if name == "fuse_mul_add3":            # a * b + c
        a, b, c = node.inputs
        if c is value or (a is value) == (b is value):
            return None
        mul = _operand(b if a is value else a, graph, out.shape, axis)
        add = _operand(c, graph, out.shape, axis)
        if mul is None or add is None:
            return None
        return [Step("mul", mul, a is value), Step("add", add)]
    if name == "clip" and node.inputs[0] is value:
        p = node.kwargs
        steps = [Step(op, Operand("scalar", scalar=float(bound)))
                 for op, bound in (("maximum", p["lower"]), ("minimum", p["upper"]))
                 if bound is not None]
        return steps or None
    if name == "leaky_relu" and node.inputs[0] is value:
        return [Step("leaky_relu", Operand("scalar", scalar=float(node.kwargs["negative_slope"])))]
    if name == "batch_norm" and axis == 1 and node.inputs[0] is value:
        stats = node.inputs[1:]
        if not all(v in graph.consts for v in stats):
            return None
        weight, bias, mean, var = (graph.consts[v].astype(np.float64).reshape(-1)
                                   for v in stats)
        scale = weight / np.sqrt(var + node.kwargs["eps"])
        vec = lambda a: Operand("vector", array=np.ascontiguousarray(a, np.float32))  # noqa
        return [Step("sub", vec(mean)), Step("mul", vec(scale)), Step("add", vec(bias))]
    return None


def _operand(var: Var, graph: Graph, shape: tuple[int, ...], axis: int) -> Operand | None:
    if var in graph.consts:
        return channel_operand(graph.consts[var], shape, axis)
    if var.type.shape == tuple(shape) and var.type.dtype == F32:
        return Operand("tensor", var=var)
    return None


def find_groups(graph: Graph) -> list[Group]:
    """Anchors with their epilogue chains, in graph order; a node joins at most one."""
    users = graph.users()
    outputs = set(graph.outputs)
    taken: set[Node] = set()
    groups = []
    for node in graph.nodes:
        if node in taken:
            continue
        kind = anchor_kind(node, graph)
        if kind is None:
            continue
        group = Group(kind, node)
        group.epilogue.steps.extend(anchor_steps(node, graph))
        axis = 1 if kind in ("conv", "depthwise") else -1
        value = node.outputs[0]
        while value not in outputs and len(users.get(value, [])) == 1:
            nxt = users[value][0]
            if nxt in taken:
                break
            steps = elementwise_steps(nxt, value, graph, axis)
            if steps is None:
                break
            group.chain.append(nxt)
            group.epilogue.steps.extend(steps)
            value = nxt.outputs[0]
        taken.update(group.nodes)
        groups.append(group)
    return groups


@dataclass(eq=False)
class AttentionMatch:
    """softmax(q @ k^T [scalar steps], last axis) @ v as three graph pieces: the scores
    group, the softmax node, the output group (whose epilogue has no tensor operand)."""

    scores: Group
    softmax: Node
    output: Group

    @property
    def operands(self) -> tuple[Var, Var, Var]:
        q, k = self.scores.anchor.inputs
        return q, k, self.output.anchor.inputs[1]


def find_attention(graph: Graph, groups: list[Group]) -> list[AttentionMatch]:
    """Every q @ k^T -> softmax -> @ v chain whose intermediates nothing else reads."""
    users, outputs = graph.users(), set(graph.outputs)
    by_anchor = {g.anchor: g for g in groups}

    def only_user(var: Var) -> Node | None:
        used = users.get(var, [])
        return used[0] if len(used) == 1 and var not in outputs else None

    found = []
    for g in groups:
        p = g.anchor.kwargs
        if g.kind != "matmul" or p["transpose_a"] or not p["transpose_b"] \
                or any(s.operand is not None and s.operand.kind != "scalar"
                       for s in g.epilogue.steps):
            continue
        sm = only_user(g.out)
        if sm is None or sm.op.name != "softmax" or sm.inputs[0] is not g.out \
                or sm.kwargs["axis"] % g.out.type.ndim != g.out.type.ndim - 1:
            continue
        nxt = only_user(sm.outputs[0])
        out = by_anchor.get(nxt)
        if out is None or out.kind != "matmul" or nxt.inputs[0] is not sm.outputs[0] \
                or nxt.inputs[1] is sm.outputs[0] or nxt.kwargs["transpose_a"] \
                or nxt.kwargs["transpose_b"] or out.epilogue.tensors():
            continue
        found.append(AttentionMatch(g, sm, out))
    return found
