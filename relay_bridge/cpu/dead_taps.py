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


# A conv's output positions each get their own conv when the map is at most this many
# positions per axis, the batch at least MIN_BATCH (the conv rule's 1x1-output tile
# stacks images: conv.stacked_tile) and the channels at least MIN_CHANNELS.
SPLIT_MAX_OUT = 2
SPLIT_MIN_BATCH = 8
SPLIT_MIN_CHANNELS = 64


def split_positions(graph: Graph) -> Graph:
    """`graph` with every float32 stride-1 conv2d on a map of at most 2x2 outputs whose
    positions meet different taps (a 3x3 pad-1 conv on a 2x2 map: each output meets 4 of
    the 9 taps, and cropping the dead ones, above, keeps all 9) computed as one conv per
    output position over its own taps and input rows, the positions concatenated back.
    ResNet-18's 2x2 stage in a training step (32x32 images: 256 channels, 64x64: 512):
    Zen 5, 1 thread, CPU time, the kernel alone, 512 channels batch 32: 2.38 ms for the
    padded conv, 4 x 0.26 ms for the positions (each a 2x2-tap conv to one output)."""
    if not any(_positions(n) is not None for n in graph.nodes):
        return graph
    return graph.rewrite(lambda node, ins, new, _remap:
                         _split(node, ins, new) if _positions(node) is not None else None)


def _positions(node: Node):
    """Per spatial axis, per output position (first tap, end tap, first input row), or
    None when the rewrite does not apply."""
    if node.op.name != "conv2d" or node.outputs[0].type.size == 0:
        return None
    x, w = node.inputs[:2]
    if x.type.dtype != "float32" or w.type.dtype != "float32" or w.type.ndim != 4:
        return None
    p = node.kwargs
    if tuple(p["dilation"]) != (1, 1) or tuple(p["stride"]) != (1, 1):
        return None
    n, c = x.type.shape[:2]
    out = node.outputs[0].type.shape
    if n < SPLIT_MIN_BATCH or min(c, out[1]) < SPLIT_MIN_CHANNELS or \
            max(out[2:]) > SPLIT_MAX_OUT or out[2] * out[3] < 2:
        return None
    axes = []
    for i in range(2):
        size, kernel, pad = x.type.shape[2 + i], w.type.shape[2 + i], p["padding"][i]
        spans = []
        for o in range(out[2 + i]):
            first, end = max(0, pad - o), min(kernel, size + pad - o)
            if first >= end:
                return None                    # a dead output: crop_dead_taps' work
            spans.append((first, end, o + first - pad))
        axes.append(spans)
    if all(e - f == w.type.shape[2 + i] for i, spans in enumerate(axes) for f, e, _ in spans):
        return None                            # every position meets every tap
    return axes


def _split(node: Node, ins: list[Var], new: Graph) -> tuple[Var]:
    x, w = ins[:2]
    rows, cols = _positions(node)
    name = node.outputs[0].name_hint

    def add(opname, inputs, **params):
        return new.add_node(op(opname), inputs, params, name)[0]

    def part(var, index):
        index = tuple((axis, a, b, None, None) for axis, a, b in index
                      if (a, b) != (0, var.type.shape[axis]))
        return add("subtensor", [var], index=index) if index else var

    grid = []
    for f0, e0, r in rows:
        line = []
        for f1, e1, c in cols:
            xs = part(x, ((2, r, r + e0 - f0), (3, c, c + e1 - f1)))
            ws = part(w, ((2, f0, e0), (3, f1, e1)))
            line.append(add("conv2d", [xs, ws], **{**node.kwargs, "padding": (0, 0)}))
        grid.append(add("concat", line, axis=3) if len(line) > 1 else line[0])
    return (add("concat", grid, axis=2) if len(grid) > 1 else grid[0],)
