"""Convolutions without the work that meets only padding.

On a small map a padded convolution has kernel taps that never meet the input (a 3x3
pad-1 conv on a 1x1 map: 8 of 9 taps) and output positions whose whole window is padding
(a training step's weight gradient of that conv, a conv of the 1x1 map padded by 1 into
a 3x3 "kernel": 8 of 9 outputs are zero). ResNet-18's last stage on 32x32 images is such
a map. The rewrite keeps the live taps (a slice of the weight), computes the live output
rows and columns, and puts the zero rows and columns back with a concat; the result is
the same. A graph rewrite on the build path only, like transposed_conv.py.
"""
from __future__ import annotations

import numpy as np

from megtrace.ir import Graph, Node, Var
from megtrace.ops.registry import get as op


def crop_dead_taps(graph: Graph) -> Graph:
    """`graph` with every float32 conv2d (dilation 1) that has dead taps or outputs
    computed on its live part only (others kept)."""
    if not any(_plan(n) is not None for n in graph.nodes):
        return graph
    return graph.rewrite(lambda node, ins, new, _remap:
                         _rewrite(node, ins, new) if _plan(node) is not None else None)


def _live(size: int, kernel: int, stride: int, pad: int, out: int
          ) -> tuple[tuple[int, int], tuple[int, int]]:
    """([first, last + 1) of the taps that meet the input, the same of the outputs whose
    window meets it) along one axis."""
    meets = [[0 <= o * stride + k - pad < size for k in range(kernel)] for o in range(out)]
    taps = [k for k in range(kernel) if any(row[k] for row in meets)]
    outs = [o for o in range(out) if any(meets[o])]
    if not taps:
        return (0, 0), (0, 0)
    return (taps[0], taps[-1] + 1), (outs[0], outs[-1] + 1)


def _plan(node: Node):
    """Per spatial axis (taps, outputs, new padding), or None when nothing is dead or the
    live part is not a symmetric-padding conv of the same input."""
    if node.op.name != "conv2d" or node.outputs[0].type.size == 0:
        return None
    x, w = node.inputs[:2]
    if x.type.dtype != "float32" or w.type.dtype != "float32":
        return None
    p = node.kwargs
    if tuple(p["dilation"]) != (1, 1):
        return None
    plan = []
    for i in range(2):
        size, kernel = x.type.shape[2 + i], w.type.shape[-2 + i]
        stride, pad, out = p["stride"][i], p["padding"][i], node.outputs[0].type.shape[2 + i]
        taps, outs = _live(size, kernel, stride, pad, out)
        if taps == (0, 0):
            return None           # all padding: leave it to the ordinary path
        new_pad = pad - taps[0] - outs[0] * stride
        span = taps[1] - taps[0]
        if new_pad < 0 or (size + 2 * new_pad - span) // stride + 1 < outs[1] - outs[0]:
            return None
        plan.append((taps, outs, new_pad))
    if all(t == (0, k) and o == (0, n) for (t, o, _), k, n in zip(
            plan, w.type.shape[-2:], node.outputs[0].type.shape[2:])):
        return None
    return plan


def _rewrite(node: Node, ins: list[Var], new: Graph) -> tuple[Var]:
    x, w = ins[:2]
    plan = _plan(node)
    name = node.outputs[0].name_hint
    lead = w.type.ndim - 2

    def add(opname, inputs, **params):
        return new.add_node(op(opname), inputs, params, name)[0]

    taps = [t for t, _, _ in plan]
    if any(t != (0, k) for t, k in zip(taps, w.type.shape[-2:])):
        w = add("subtensor", [w], index=tuple((lead + i, a, b, None, None)
                                              for i, (a, b) in enumerate(taps)))
    y = add("conv2d", [x, w], **{**node.kwargs, "padding": tuple(p for _, _, p in plan)})
    for i, (_, (first, last), _) in enumerate(plan):
        axis = 2 + i
        if y.type.shape[axis] != last - first:
            y = add("subtensor", [y], index=((axis, 0, last - first, None, None),))
        full = node.outputs[0].type.shape[axis]
        parts = []
        for count in (first, full - last):
            shape = tuple(y.type.shape[:axis]) + (count,) + tuple(y.type.shape[axis + 1:])
            parts.append(add("broadcast_to", [new.add_const(np.zeros((), "float32"))],
                             shape=shape) if count else None)
        pieces = [v for v in (parts[0], y, parts[1]) if v is not None]
        if len(pieces) > 1:
            y = add("concat", pieces, axis=axis)
    return (y,)
