"""One node per value: nodes that compute what an earlier node computes are merged.

A training step's backward repeats work that its rules write independently: a strided
convolution's weight gradient is assembled from one weight gradient per stride phase,
and each phase transposes the same output gradient (ResNet-18: four identical
transposes and weight packs of each strided layer's output gradient). A node with the
same op, params and (merged) inputs as an earlier one is replaced by that one. Random
ops (a `seed` param), value-shaped and interpreted ops are never merged. A graph rewrite
on the build path only, like transposed_conv.py.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from megtrace.ir import Graph, Node, Var


SMALL_CONST = 64       # constants up to this many elements are merged by value
RECOMPUTED = ":recompute"   # megtrace/jit/sublinear.py's name for a re-emitted value


def merge_common_subexprs(graph: Graph) -> Graph:
    """`graph` with every repeated computation done once (the graph itself if none is)."""
    nodes, merged = _merge(graph)
    if not merged:
        return graph
    new = Graph(list(graph.inputs), dict(graph.consts), nodes, [], list(graph.input_names))
    new.set_outputs(list(graph.outputs), list(graph.output_names))
    return new.prune()


def duplicates(graph: Graph) -> dict[Var, Var]:
    """{value: the earlier value it repeats} (constants and node outputs)."""
    return _merge(graph)[1]


# ops whose repetition costs real work; any other repeated node (elementwise, layout) is
# merged only when nothing but merged nodes and conv weights read it: merging a cheap
# node that two live kernels read makes TVM write it out instead of fusing it into both
# (merging every such node measured 180 -> 190 ms per ResNet-18 training step)
COSTLY = frozenset({"reduce", "conv2d", "conv_bias", "matmul", "batched_matmul",
                    "pool2d", "adaptive_pool2d", "softmax", "conv_transpose2d"})
_CONVS = ("conv2d", "conv_bias")


def _merge(graph: Graph) -> tuple[list[Node], dict[Var, Var]]:
    """The nodes that stay (inputs redirected to the first of equal values), and the map
    from each merged value to that first one. A node with a graph output stays (the
    outputs are distinct buffers)."""
    merged: dict[Var, Var] = {}
    first_const: dict[tuple, Var] = {}
    for var, array in graph.consts.items():
        if array.size <= SMALL_CONST:
            key = (array.dtype.str, array.shape, array.tobytes(), str(var.type))
            kept = first_const.setdefault(key, var)
            if kept is not var:
                merged[var] = kept
    repeats = _repeats(graph, dict(merged))
    users = graph.users()
    last = _last_reads(graph, users)
    taken: set[Node] = set()
    for node in reversed(graph.nodes):
        if node in repeats and _keeps_lifetimes(node, repeats[node], last) and (
                node.op.name in COSTLY or all(
                    u in taken or _reads_as_weight(u, node) for v in node.outputs
                    for u in users.get(v, []))):
            taken.add(node)
    nodes = []
    for node in graph.nodes:
        if node in taken:
            merged.update(zip(node.outputs, repeats[node].outputs))
            continue
        ins = tuple(merged.get(v, v) for v in node.inputs)
        same = all(a is b for a, b in zip(ins, node.inputs))
        nodes.append(node if same else Node(node.op, ins, node.params, node.outputs))
    return nodes, merged


def _repeats(graph: Graph, merged: dict[Var, Var]) -> dict[Node, Node]:
    """{node: the earlier node computing the same values}."""
    outputs = set(graph.outputs)
    first: dict[tuple, Node] = {}
    found: dict[Node, Node] = {}
    for node in graph.nodes:
        if outputs.intersection(node.outputs):
            continue
        key = _key(node, [merged.get(v, v) for v in node.inputs])
        if key is None:
            continue
        earlier = first.setdefault(key, node)
        if earlier is not node:
            found[node] = earlier
            merged.update(zip(node.outputs, earlier.outputs))
    return found


# Merging a repeat that runs long after the first value's last read keeps that value
# alive across the gap: more peak memory to save one recomputation (the sublinear/DTR
# plan's own recomputations are skipped by name, RECOMPUTED). Values up to SMALL_VALUE
# elements (per-channel statistics) merge at any distance.
MAX_GAP = 64
SMALL_VALUE = 4096


def _last_reads(graph: Graph, users: dict[Var, list[Node]]) -> dict[Var, int]:
    """The position of each node output's last reader (past the end: a graph output)."""
    at = {node: i for i, node in enumerate(graph.nodes)}
    end = len(graph.nodes)
    outputs = set(graph.outputs)
    return {v: end if v in outputs else max((at[u] for u in users.get(v, [])), default=at[n])
            for n in graph.nodes for v in n.outputs}


def _keeps_lifetimes(node: Node, earlier: Node, last: dict[Var, int]) -> bool:
    """Whether reading `earlier`'s values instead of `node`'s keeps no large value alive
    more than MAX_GAP nodes longer than it was."""
    return all(v.type.size <= SMALL_VALUE or last[v] - last[e] <= MAX_GAP
               for v, e in zip(node.outputs, earlier.outputs))


def _reads_as_weight(user: Node, node: Node) -> bool:
    """`user` is a convolution that reads `node`'s value as its weight only (the CPU
    lowering packs a runtime weight once per value)."""
    return user.op.name in _CONVS and user.inputs[1] in node.outputs and \
        user.inputs[0] not in node.outputs


def _key(node: Node, inputs: list[Var]) -> tuple | None:
    op = node.op
    params = dict(node.params)
    if op.value_shaped or op.interpreted or "seed" in params:
        return None
    if any(v.name_hint.endswith(RECOMPUTED) for v in node.outputs):
        return None      # a sublinear/DTR plan's recomputation: merging it undoes the plan
    return (op.name, tuple(inputs),
            tuple((k, _frozen(v)) for k, v in sorted(params.items())))


def _frozen(value: Any) -> Any:
    """A hashable stand-in that is equal only for equal values of the same type."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _frozen(v)) for k, v in sorted(value.items(), key=repr)))
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value).__name__, repr(value))
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))       # merged only with itself
    return (type(value).__name__, value)
