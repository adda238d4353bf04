"""A conv net's early layers run image by image at batch > 1.

Kernels run one layer at a time over the whole batch, so at batch 8 every activation of
MobileNetV2's 112x112-28x28 layers (1.6-4.8 MB an image... 13-38 MB in all) makes a
round trip through L3 between two kernels, while their weights (a few KB to 100 KB)
would be reused from cache anyway. Run image by image, those layers keep their
activations in L2, as at batch 1: their kernels took 18.7-21.5 ms at batch 8 against
8 x 1.79 ms at batch 1 (1 thread, CPU time, per-kernel minima). Later layers, whose
weights outweigh an image's activations (7x7 maps: 0.4-1.6 MB of weights), stay
batched, where each weight is read once for all images.

The rewrite: each image is sliced from the input, runs the prefix of the graph up to
a cut, and the images' cut values are concatenated along the batch axis for the rest.
The prefix holds only per-image ops (convolutions, inference batch norms, elementwise
ops with per-channel or same-batch operands, pooling) and ends at a value that alone
crosses into the rest (a block boundary), small enough that the concat costs little.
A graph rewrite on the rules' build path only, like dead_taps.py.
"""
from __future__ import annotations

import os

from megtrace.ir import Graph, Node, Var
from megtrace.ops.registry import get as op

from .epilogue import BINARY_OPS, UNARY_OPS
from .plan import F32

ENV = "MEGTRACE_BATCH_SPLIT"            # 0/off: never split
MAX_CUT_BYTES = 256 << 10               # one image's value at the cut
MIN_BATCH_BYTES = 2 << 20               # a prefix activation of the whole batch: > L2
MAX_WEIGHT_RATIO = 0.5                  # conv weight bytes / one image's in + out bytes
_ELEMENTWISE = {*UNARY_OPS, *BINARY_OPS, "clip", "leaky_relu", "fuse_mul_add3",
                "fuse_add_relu", "fuse_add_sigmoid", "fuse_add_tanh"}


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def split_batch(graph: Graph) -> Graph:
    """`graph` with its prefix run per image when that pays (see the module docstring),
    else `graph` itself."""
    if not enabled():
        return graph
    cut = find_cut(graph)
    if cut is None:
        return graph
    return _rewrite(graph, *cut)


def find_cut(graph: Graph) -> tuple[int, Var] | None:
    """(number of prefix nodes, the value at the cut) or None."""
    if len(graph.inputs) != 1 or graph.inputs[0].type.ndim != 4:
        return None
    x = graph.inputs[0]
    n = x.type.shape[0]
    if n < 2 or x.type.dtype != F32:
        return None
    users = graph.users()
    outputs = set(graph.outputs)
    remaining = {v: len(users.get(v, [])) for v in graph.inputs}
    live = {x}
    best, largest = None, 0
    for i, node in enumerate(graph.nodes):
        if not _per_image(node, graph, n):
            break
        for v in node.inputs:
            if v in live:
                remaining[v] -= 1
                if remaining[v] == 0:
                    live.discard(v)
        out = node.outputs[0]
        if out in outputs:
            break
        remaining[out] = len(users.get(out, []))
        live.add(out)
        largest = max(largest, out.type.size * 4)
        if len(live) == 1 and out.type.size * 4 // n <= MAX_CUT_BYTES \
                and largest >= MIN_BATCH_BYTES:
            best = (i + 1, out)
    return best


def _per_image(node: Node, graph: Graph, n: int) -> bool:
    """Whether `node` computes each image from that image alone (and its constants),
    and is worth running per image (a conv's weight is small next to its activations)."""
    if len(node.outputs) != 1:
        return False
    out = node.outputs[0].type
    if out.dtype != F32 or out.ndim != 4 or out.shape[0] != n:
        return False
    name = node.op.name
    runtime = [v for v in node.inputs if v not in graph.consts]
    if any(v.type.ndim != 4 or v.type.shape[0] != n for v in runtime):
        return False
    consts = [graph.consts[v] for v in node.inputs if v in graph.consts]
    if name in ("conv2d", "conv_bias"):
        if len(runtime) != 1 or node.inputs[0] is not runtime[0]:
            return False
        weight = graph.consts[node.inputs[1]].nbytes
        image = (node.inputs[0].type.size + out.size) * 4 // n
        return weight <= MAX_WEIGHT_RATIO * image
    if name == "batch_norm" or name in _ELEMENTWISE or name == "pool2d":
        # constants broadcast over the batch: no batch axis of their own
        return all(c.ndim < 4 or c.shape[0] == 1 for c in consts)
    return False


def _rewrite(graph: Graph, count: int, cut: Var) -> Graph:
    x = graph.inputs[0]
    n = x.type.shape[0]
    new = Graph(list(graph.inputs), dict(graph.consts), [], [], list(graph.input_names))
    prefix, rest = graph.nodes[:count], graph.nodes[count:]
    parts = []
    for i in range(n):
        image = new.add_node(op("subtensor"), [x], {"index": ((0, i, i + 1, None, None),)},
                             f"{x.name_hint}[{i}]")[0]
        remap: dict[Var, Var] = {x: image}
        for node in prefix:
            outs = new.add_node(node.op, [remap.get(v, v) for v in node.inputs], node.kwargs,
                                node.outputs[0].name_hint)
            remap.update(zip(node.outputs, outs))
        parts.append(remap[cut])
    remap = {cut: new.add_node(op("concat"), parts, {"axis": 0}, cut.name_hint)[0]}
    for node in rest:
        kept = [v.type for v in node.outputs] if node.op.value_shaped else None
        outs = new.add_node(node.op, [remap.get(v, v) for v in node.inputs], node.kwargs,
                            node.outputs[0].name_hint, out_types=kept)
        remap.update(zip(node.outputs, outs))
    new.set_outputs([remap.get(v, v) for v in graph.outputs], graph.output_names)
    return new.prune()
