"""Concatenations with zeros as zero padding.

Gradients put zeros around a value with a concat: the polyphase weight gradient of a
strided conv pads its input and its phases (ops/conv.py's _pad_zeros), dead_taps.py puts
back the dead rows of a weight gradient. The zeros are constants, so the graph folds
them into arrays as large as the value (ResNet-18's last stage at 32x32: 8 MB of zeros
per weight gradient) that every run reads, in the transposed order of the kernel that
fuses them. A `pad` node computes the same tensor from a bounds check and reads
nothing. A graph rewrite on the build path only, like dead_taps.py.
"""
from __future__ import annotations

import numpy as np

from megtrace.ir import Graph, Node, Var
from megtrace.ops.registry import get as op


def concat_zeros_as_pad(graph: Graph) -> Graph:
    """`graph` with every floating-point concat of one value and all-zero constants
    along one axis computed as a `pad` of that value (others kept)."""
    zeros = _zero_values(graph)
    if not any(_plan(n, zeros) is not None for n in graph.nodes):
        return graph
    return graph.rewrite(lambda node, ins, new, _remap: _rewrite(node, ins, new, zeros))


def _zero_values(graph: Graph) -> set[Var]:
    """The all-zero constants of `graph` and the broadcasts of them (the zeros a traced
    gradient makes stay broadcast_to nodes until the build drops their shape inputs)."""
    zeros = {v for v, a in graph.consts.items() if not np.any(a)}
    for node in graph.nodes:
        if node.op.name == "broadcast_to" and node.inputs[0] in zeros:
            zeros.add(node.outputs[0])
    return zeros


def _plan(node: Node, zeros: set[Var]) -> tuple[int, int, int, int] | None:
    """(axis, zeros before, zeros after, index of the live input), or None when `node` is
    not a floating-point concat of exactly one non-zero input and zeros."""
    if node.op.name != "concat":
        return None
    out = node.outputs[0].type
    if not np.issubdtype(np.dtype(out.dtype), np.floating) or out.size == 0:
        return None
    live = [i for i, v in enumerate(node.inputs) if v not in zeros]
    if len(live) != 1:
        return None
    axis, k = node.kwargs["axis"] % out.ndim, live[0]
    before = sum(v.type.shape[axis] for v in node.inputs[:k])
    after = sum(v.type.shape[axis] for v in node.inputs[k + 1:])
    return axis, before, after, k


def _rewrite(node: Node, ins: list[Var], new: Graph, zeros: set[Var]) -> tuple[Var] | None:
    plan = _plan(node, zeros)
    if plan is None:
        return None
    axis, before, after, k = plan
    width = tuple((before, after) if i == axis else (0, 0)
                  for i in range(node.outputs[0].type.ndim))
    return new.add_node(op("pad"), [ins[k]], {"pad_width": width, "mode": "constant",
                                              "value": 0.0}, node.outputs[0].name_hint)
