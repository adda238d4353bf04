"""Transposed convolutions as ordinary stride-1 convolutions (the sub-pixel form).

Output position o = q*s + r of a transposed convolution (stride s, dilation 1) only
receives kernel taps k = r + s*t, each from input position q - t. So every phase r is a
correlation of the input with the flipped sub-kernel w[r + s*t] (T = ceil(K/s) taps,
missing ones zero). All s**nd phases become output channels of ONE convolution, which the
CPU conv rule computes; a depth-to-space reshape/transpose interleaves them back and a
slice crops the padding. TVM's own conv_transpose dilates the input with zeros and runs a
direct loop nest (minutes for MegEngine's ConvTranspose3d test, and every convolution's
input gradient in a training step is one).

A graph rewrite on the build path only: dumps keep MegEngine's ConvolutionBackwardData.
"""
from __future__ import annotations

import math

import numpy as np

from megtrace.ir import Graph, Node, Var
from megtrace.ops.registry import get as op


def as_subpixel_convs(graph: Graph) -> Graph:
    """`graph` with every dilation-1 float conv_transpose2d/3d rewritten (others kept)."""
    if not any(_applies(n) for n in graph.nodes):
        return graph
    return graph.rewrite(lambda node, ins, new, _remap:
                         _subpixel(node, ins, new) if _applies(node) else None)


def _applies(node: Node) -> bool:
    return (node.op.name in ("conv_transpose2d", "conv_transpose3d")
            and all(d == 1 for d in node.kwargs["dilation"])
            and node.inputs[0].type.dtype == "float32"
            and node.inputs[1].type.dtype == "float32"
            and node.outputs[0].type.size > 0)


def subpixel_index(groups: int, icg: int, ocg: int, kernel: tuple, stride: tuple
                   ) -> tuple[np.ndarray, tuple]:
    """Flat indices into the transposed weight (G*ICg, OCg, *K), laid out as the
    sub-pixel conv weight (G*OCg*P, ICg, *T) (phases after channels); index `size`
    (one past the end) stands for a zero tap. Also returns T."""
    nd = len(kernel)
    taps = tuple(-(-k // s) for k, s in zip(kernel, stride))
    w_index = np.arange(groups * icg * ocg * math.prod(kernel)).reshape(
        (groups, icg, ocg) + kernel)
    zero = w_index.size
    out = np.full((groups, ocg) + tuple(stride) + (icg,) + taps, zero, np.int64)
    for r in np.ndindex(*stride):
        for u in np.ndindex(*taps):
            k = tuple(r[i] + stride[i] * (taps[i] - 1 - u[i]) for i in range(nd))
            if all(k[i] < kernel[i] for i in range(nd)):
                sel = (slice(None), slice(None)) + r + (slice(None),) + u
                out[sel] = np.moveaxis(w_index[(slice(None),) * 3 + k], 1, 2)
    return out.reshape((groups * ocg * math.prod(stride), icg) + taps).astype(np.int32), taps


def _subpixel(node: Node, ins: list[Var], new: Graph) -> tuple[Var]:
    x, w = ins
    p = node.kwargs
    nd = x.type.ndim - 2
    stride, padding = tuple(p["stride"]), tuple(p["padding"])
    n, sp = x.type.shape[0], tuple(x.type.shape[2:])
    grouped = w.type.ndim == nd + 3
    groups, icg = (w.type.shape[0], w.type.shape[1]) if grouped else (1, w.type.shape[0])
    ocg, kernel = w.type.shape[-nd - 1], tuple(w.type.shape[-nd:])
    out_sp = tuple(node.outputs[0].type.shape[2:])
    index, taps = subpixel_index(groups, icg, ocg, kernel, stride)
    name = node.outputs[0].name_hint

    def add(opname, inputs, **params):
        return new.add_node(op(opname), inputs, params, name)[0]

    if all(s == 1 for s in stride):
        # one phase: the sub-pixel weight is the weight with its channel axes swapped
        # and its taps flipped, two copies the build fuses into the conv's weight
        # packing (a gather through `index` costs a pass of its own per step)
        lead = (0, 2, 1) if grouped else (1, 0)
        wk = add("transpose", [w], pattern=lead + tuple(range(len(lead), len(lead) + nd)))
        wk = add("subtensor", [wk], index=tuple((len(lead) + i, None, None, -1, None)
                                                for i in range(nd)))
    else:
        flat = add("reshape", [w], shape=(w.type.size,))
        flat = add("concat", [flat, new.add_const(np.zeros(1, "float32"))], axis=0)
        wk = add("take", [flat, new.add_const(index)], axis=0)
        if groups > 1:
            wk = add("reshape", [wk], shape=(groups, ocg * math.prod(stride), icg) + taps)
    # per-phase positions the crop needs, [padding // s, need), and the smallest symmetric
    # conv padding that covers them: starting at phase position padding // s rather than
    # 0 keeps a stride-1 input gradient (pad k-1-p) from computing k-1 rows and columns
    # it crops away (ResNet-18's 512-channel 1x1 layers: 9x the work)
    need = tuple(-(-(padding[i] + out_sp[i]) // stride[i]) for i in range(nd))
    pad = tuple(max(taps[i] - 1 - padding[i] // stride[i], need[i] - sp[i], 0)
                for i in range(nd))
    shift = tuple(pad[i] - (taps[i] - 1) for i in range(nd))
    y = add(f"conv{nd}d", [x, wk], stride=(1,) * nd, padding=pad, dilation=(1,) * nd)
    q = tuple(y.type.shape[2:])
    c = groups * ocg
    y = add("reshape", [y], shape=(n, c) + stride + q)
    y = add("transpose", [y], pattern=(0, 1) + tuple(v for i in range(nd)
                                                     for v in (2 + nd + i, 2 + i)))
    y = add("reshape", [y], shape=(n, c) + tuple(qi * s for qi, s in zip(q, stride)))
    begin = tuple(padding[i] + shift[i] * stride[i] for i in range(nd))
    y = add("subtensor", [y], index=tuple((2 + i, begin[i], begin[i] + out_sp[i], None, None)
                                          for i in range(nd)))
    return (y,)
