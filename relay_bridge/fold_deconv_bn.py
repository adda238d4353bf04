"""BatchNorm folded into the transposed convolution before it (DCGAN generators, decoder
heads): TVM's FoldBatchnormToConv2D knows only conv2d, and left alone it decomposes the
BatchNorm into four Elemwise oprs, a bigger file than the unoptimized one. Folding it
leaves the deconvolution with scaled weights and one per-channel ADD (which the
arithmetic fusion then merges with a following ReLU).

A transposed convolution sums x[ic] * W[ic, oc] into output channel oc, so a per-channel
scale of the output multiplies the weight along its OUTPUT-channel axis: axis 1 of a
dense (IC, OC, *K) weight, axis 2 of a grouped (G, ICg, OCg, *K) one.
"""
from __future__ import annotations

import numpy as np

from megtrace.ir import Graph, Node, Var
from megtrace.ops import get

_DECONV = ("conv_transpose2d", "conv_transpose3d")


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


def fold_batchnorm_into_deconv(g: Graph) -> Graph:
    """batch_norm(conv_transpose(x, W) [+ b]) with constant W, b and statistics ->
    conv_transpose(x, W * scale) + (b - mean) * scale + beta, where the deconvolution
    (and the bias add) feed nothing else."""
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
        deconv = producer.get(head)
        if deconv is None or deconv.op.name not in _DECONV or not private(head) or \
                deconv.inputs[1] not in g.consts:
            return None
        gamma, beta, mean, var = (g.consts[v].astype(np.float64) for v in node.inputs[1:])
        scale = gamma / np.sqrt(var + node.kwargs["eps"])
        shift = beta - mean * scale
        if bias is not None:
            shift = shift + bias.astype(np.float64) * scale
        w = g.consts[deconv.inputs[1]]
        nd = deconv.outputs[0].type.ndim - 2
        kernel = (1,) * nd
        if w.ndim == nd + 3:               # grouped: (G, ICg, OCg, *K)
            groups = w.shape[0]
            per_oc = scale.reshape((groups, 1, channels // groups) + kernel)
        else:                              # dense: (IC, OC, *K)
            per_oc = scale.reshape((1, channels) + kernel)
        folded = new.add_const((w.astype(np.float64) * per_oc).astype(w.dtype),
                               deconv.inputs[1].name_hint)
        x = remap.get(deconv.inputs[0], deconv.inputs[0])
        (out,) = new.add_node(deconv.op, [x, folded], deconv.kwargs,
                              deconv.outputs[0].name_hint)
        dtype = node.outputs[0].type.dtype
        return new.add_node(get("add"), [out, new.add_const(shift.astype(dtype))], {},
                            node.outputs[0].name_hint)

    return g.rewrite(rule)
