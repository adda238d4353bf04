"""MegEngine's parameter redistribution on megtrace's lifted graph: constant biases moved
to where they cost nothing, so the dump has MegEngine's oprs (its optimize_for_inference
runs ParamRedistributePass and ReorderArithChainPass before it fuses ConvBias).

- A convolution without padding is linear in its input, so conv(x + b, W) with a
  per-channel constant b is conv(x, W) + shift, shift[oc] = sum over ic and the kernel
  of W[oc, ic, ...] * b[ic]. The bias then leaves x's readers and joins the sum after the
  convolution (MobileNetV2: a block's projection bias moves into the next block's
  expansion convolution).
- A chain of adds (each intermediate read once) is a sum of terms: its constants are
  summed into one and added last, after the tensors. A residual block
  relu((conv2 + b2) + (conv_ds + b_ds)) becomes relu((conv2 + conv_ds) + (b2 + b_ds)):
  ConvBias(x, W2, bias=conv_ds) and a constant add, and the downsample convolution needs
  no bias of its own.
"""
from __future__ import annotations

import numpy as np

from megtrace.ir import Graph, Node, Var
from megtrace.ops import get


def _channel_const(v: Var, g: Graph, channels: int) -> np.ndarray | None:
    """The value of `v` when it is a constant (1, channels, 1, 1)."""
    value = g.consts.get(v)
    if value is not None and value.shape == (1, channels, 1, 1):
        return value
    return None


def _conv_of_constant(w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """conv(b, W) for a per-channel b and an unpadded convolution: (1, OC, 1, 1)."""
    bias = b.reshape(-1).astype(np.float64)
    if w.ndim == 5:                                  # grouped (G, OCg, ICg, kh, kw)
        groups, _, icg = w.shape[:3]
        per_group = w.astype(np.float64).sum(axis=(3, 4))            # (G, OCg, ICg)
        shift = np.einsum("goi,gi->go", per_group, bias.reshape(groups, icg))
    else:                                            # dense (OC, IC, kh, kw)
        shift = w.astype(np.float64).sum(axis=(2, 3)) @ bias
    return shift.reshape(1, -1, 1, 1).astype(w.dtype)


def distribute_bias_through_conv(g: Graph) -> Graph:
    """conv2d(x + b, W) -> conv2d(x, W) + conv(b, W) where the convolution has no padding
    and W and the per-channel b are constants."""
    producer = g.producers()
    conv, add = get("conv2d"), get("add")

    def rule(node: Node, ins, new, remap):
        if node.op is not conv or any(node.kwargs["padding"]) or node.inputs[1] not in g.consts:
            return None
        summed = producer.get(node.inputs[0])
        if summed is None or summed.op is not add:
            return None
        for term, bias in ((0, 1), (1, 0)):
            b = _channel_const(summed.inputs[bias], g, node.inputs[0].type.shape[1])
            if b is not None and summed.inputs[term] not in g.consts:
                break
        else:
            return None
        w = g.consts[node.inputs[1]]
        x = remap.get(summed.inputs[term], summed.inputs[term])
        (y,) = new.add_node(conv, [x, ins[1]], node.kwargs, node.outputs[0].name_hint)
        return new.add_node(add, [y, new.add_const(_conv_of_constant(w, b))], {})

    return g.rewrite(rule)


def reorder_add_chains(g: Graph) -> Graph:
    """Each maximal chain of adds whose intermediates are read once becomes
    ((t1 + t2) + ...) + c, its tensor terms in their order and its constants summed."""
    add = get("add")
    producer, users, outputs = g.producers(), g.users(), set(g.outputs)

    def inner(v: Var) -> Node | None:
        """The add producing `v` when it belongs to the chain that reads it."""
        node = producer.get(v)
        if node is None or node.op is not add or v in outputs or len(users.get(v, [])) != 1:
            return None
        return node

    def terms(node: Node) -> list[Var]:
        out: list[Var] = []
        for v in node.inputs:
            sub = inner(v)
            out.extend(terms(sub) if sub is not None else [v])
        return out

    def read_by_an_add(node: Node) -> bool:
        readers = users.get(node.outputs[0], [])
        return inner(node.outputs[0]) is not None and readers[0].op is add

    def rule(node: Node, ins, new, remap):
        if node.op is not add or read_by_an_add(node):
            return None                  # not an add, or not the chain's last add
        leaves = terms(node)
        consts = [g.consts[v] for v in leaves if v in g.consts]
        tensors = [remap.get(v, v) for v in leaves if v not in g.consts]
        if len(leaves) == 2 or not consts or not tensors:
            return None
        dtype = node.outputs[0].type.dtype
        total = sum(c.astype(np.float64) for c in consts).astype(dtype)
        if np.broadcast_shapes(total.shape, node.outputs[0].type.shape) != \
                node.outputs[0].type.shape:
            return None
        acc = tensors[0]
        for t in tensors[1:]:
            (acc,) = new.add_node(add, [acc, t], {})
        return new.add_node(add, [acc, new.add_const(total)], {}, node.outputs[0].name_hint)

    return g.rewrite(rule)


def redistribute_params(g: Graph) -> Graph:
    """Both rewrites, in MegEngine's order."""
    return reorder_add_chains(distribute_bias_through_conv(g))
