"""Inference BatchNorm folded into the convolution before it, on megtrace's own graph.

TVM's FoldBatchnormToConv2D sees only a dense-weight conv2d: a grouped or depthwise
weight (MegEngine's (G, OCg, ICg, kh, kw)) reaches Relax reshaped, a 3-D convolution or a
transposed one is another op, and each such BatchNorm was left decomposed into four
Elemwise oprs (SUB, TRUE_DIV, MUL, ADD: 17 of them in MobileNetV2's depthwise blocks).
Folding here leaves every kind of convolution with scaled weights and one per-channel
ADD, which the arithmetic fusion then merges into ConvBias.

A per-output-channel scale multiplies the weight along its output-channel axis: axis 0
of a dense convolution's (OC, IC, *K), axes 0-1 of a grouped (G, OCg, ICg, *K); a
transposed convolution sums x[ic] * W[ic, oc] into oc, so axis 1 of a dense (IC, OC, *K)
and axis 2 of a grouped (G, ICg, OCg, *K).
"""
from __future__ import annotations

import numpy as np

from megtrace.ir import Graph, Node, Var
from megtrace.ops import get

_CONV = ("conv2d", "conv3d")
_DECONV = ("conv_transpose2d", "conv_transpose3d")


def _per_output_channel(op_name: str, w: np.ndarray, nd: int, scale: np.ndarray) -> np.ndarray:
    """`scale` shaped to broadcast along the output-channel axis of weight `w`."""
    kernel = (1,) * nd
    grouped = w.ndim == nd + 3
    if op_name in _CONV:
        if grouped:                        # (G, OCg, ICg, *K)
            return scale.reshape((w.shape[0], w.shape[1], 1) + kernel)
        return scale.reshape((w.shape[0], 1) + kernel)   # (OC, IC, *K)
    if grouped:                            # (G, ICg, OCg, *K)
        return scale.reshape((w.shape[0], 1, w.shape[2]) + kernel)
    return scale.reshape((1, w.shape[1]) + kernel)       # (IC, OC, *K)


def _channel_bias(node: Node, g: Graph, channels: int) -> tuple[Var, np.ndarray] | None:
    """(the other operand, the bias) when `node` adds a constant (1, C, 1, ...) bias."""
    if node.op is not get("add"):
        return None
    for mine, other in ((1, 0), (0, 1)):
        value = g.consts.get(node.inputs[mine])
        if value is not None and node.inputs[other] not in g.consts and \
                value.shape == (1, channels) + (1,) * (node.outputs[0].type.ndim - 2):
            return node.inputs[other], value
    return None


def fold_batchnorm_into_conv(g: Graph) -> Graph:
    """batch_norm(conv(x, W) [+ b]) with constant W, b and statistics, for a conv2d/3d or
    conv_transpose2d/3d -> conv(x, W * scale) + (b - mean) * scale + beta, where the
    convolution (and the bias add) feed nothing else."""
    producer, users, outputs = g.producers(), g.users(), set(g.outputs)
    bn = get("batch_norm")

    def private(v: Var) -> bool:
        return len(users.get(v, [])) == 1 and v not in outputs

    def rule(node, ins, new, remap):
        if node.op is not bn or not all(v in g.consts for v in node.inputs[1:]):
            return None
        channels = node.inputs[0].type.shape[1]
        head, bias = node.inputs[0], None
        added = producer.get(head)
        found = _channel_bias(added, g, channels) if added is not None else None
        if found is not None and private(head):
            head, bias = found
        conv = producer.get(head)
        if conv is None or conv.op.name not in _CONV + _DECONV or not private(head) or \
                len(conv.inputs) != 2 or conv.inputs[1] not in g.consts:
            return None
        gamma, beta, mean, var = (g.consts[v].astype(np.float64) for v in node.inputs[1:])
        scale = gamma / np.sqrt(var + node.kwargs["eps"])
        shift = beta - mean * scale
        if bias is not None:
            shift = shift + bias.astype(np.float64) * scale
        w = g.consts[conv.inputs[1]]
        per_oc = _per_output_channel(conv.op.name, w, conv.outputs[0].type.ndim - 2, scale)
        folded = new.add_const((w.astype(np.float64) * per_oc).astype(w.dtype),
                               conv.inputs[1].name_hint)
        x = remap.get(conv.inputs[0], conv.inputs[0])
        (out,) = new.add_node(conv.op, [x, folded], conv.kwargs, conv.outputs[0].name_hint)
        dtype = node.outputs[0].type.dtype
        return new.add_node(get("add"), [out, new.add_const(shift.astype(dtype))], {},
                            node.outputs[0].name_hint)

    return g.rewrite(rule)
