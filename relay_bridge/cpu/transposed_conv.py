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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class _Phase:
    """One output phase of one axis: the live taps k_begin, k_begin + step, ... < k_end
    of the weight (`taps` of them), read from input rows [begin, end) with conv padding
    `pad` and output crop [crop, crop + positions)."""
    k_begin: int
    k_end: int
    step: int
    taps: int
    begin: int
    end: int
    pad: int
    crop: int


def axis_phases(size: int, kernel: int, stride: int, padding: int, out: int
                ) -> tuple[int, list[_Phase | None]]:
    """(M, the phases rho = 0 .. s-1) of one axis of a transposed conv: output position
    o = m * s + rho (m < M = ceil(out / s)) gathers taps k = r + s * t, r = (rho + p) % s,
    from input position q - t, q = m + (rho + p - r) / s. Only the taps that meet the
    input for some m are kept; None: no tap of the phase meets it (zero outputs)."""
    m = -(-out // stride)
    phases: list[_Phase | None] = []
    for rho in range(stride):
        r = (rho + padding) % stride
        if r >= kernel:
            phases.append(None)
            continue
        taps = -(-(kernel - r) // stride)
        base = (rho + padding - r) // stride - (taps - 1)   # input of m = 0, flipped tap 0
        u0, u1 = max(0, -base - (m - 1)), min(taps - 1, size - 1 - base)
        if u0 > u1:
            phases.append(None)
            continue
        first, live = base + u0, u1 - u0 + 1
        last = first + m + live - 2                         # the last input row read
        begin, end = max(first, 0), min(last, size - 1) + 1
        lo, hi = begin - first, last - (end - 1)            # zero rows before / after
        pad = max(lo, hi)
        phases.append(_Phase(r + stride * (taps - 1 - u1), r + stride * (taps - 1 - u0) + 1,
                             stride, live, begin, end, pad, pad - lo))
    return m, phases


def _per_phase(x: Var, w: Var, stride: tuple, padding: tuple, out_sp: tuple, add,
               new: Graph) -> Var:
    """A strided 2-D transposed conv as one stride-1 conv per output phase, each with
    its own sub-kernel (the phase's taps: 2x2, 2x1, 1x2 and 1x1 of a 3x3/2 weight, not
    four zero-filled 2x2) over the input rows it reads, computing only the positions the
    output keeps; the phases interleave by concat and reshape. One conv of all phases
    as output channels (a gather of the weight with zero taps, then a crop) did 16/9 of
    the multiply-adds, and on small maps most of its outputs were cropped (ResNet-18's
    last stride-2 input gradient on 32x32 images: 16x)."""
    n, c = x.type.shape[0], w.type.shape[1]
    axes = [axis_phases(x.type.shape[2 + i], w.type.shape[2 + i], stride[i], padding[i],
                        out_sp[i]) for i in range(2)]
    (m0, rows), (m1, cols) = axes
    zero = new.add_const(np.zeros((), "float32"))
    grid = []
    for a in rows:
        blocks = []
        for b in cols:
            if a is None or b is None:
                y = add("broadcast_to", [zero], shape=(n, c, m0, m1))
            else:
                y = _phase_conv(x, w, (a, b), (m0, m1), add)
            blocks.append(add("reshape", [y], shape=(n, c, m0, 1, m1, 1)))
        grid.append(add("concat", blocks, axis=5) if len(blocks) > 1 else blocks[0])
    y = add("concat", grid, axis=3) if len(grid) > 1 else grid[0]
    y = add("reshape", [y], shape=(n, c, m0 * stride[0], m1 * stride[1]))
    if tuple(y.type.shape[2:]) != tuple(out_sp):
        y = add("subtensor", [y], index=tuple((2 + i, 0, o, None, None)
                                              for i, o in enumerate(out_sp)))
    return y


def _phase_conv(x: Var, w: Var, phases: tuple, positions: tuple, add) -> Var:
    """One phase's conv: its taps of the (IC, OC, *K) transposed-conv weight, flipped and
    transposed (each phase's own copies, which the build fuses into its weight packing;
    one transpose shared by the phases was a kernel of its own), over its input rows."""
    index = tuple((2 + i, ph.begin, ph.end, None, None) for i, ph in enumerate(phases)
                  if (ph.begin, ph.end) != (0, x.type.shape[2 + i]))
    if index:
        x = add("subtensor", [x], index=index)
    k = add("subtensor", [w], index=tuple((2 + i, ph.k_begin, ph.k_end, ph.step, None)
                                          for i, ph in enumerate(phases)))
    k = add("subtensor", [k], index=tuple((2 + i, None, None, -1, None) for i in range(2)))
    k = add("transpose", [k], pattern=(1, 0, 2, 3))
    y = add("conv2d", [x, k], stride=(1, 1), padding=tuple(ph.pad for ph in phases),
            dilation=(1, 1))
    if any(y.type.shape[2 + i] != m or ph.crop for i, (ph, m) in enumerate(zip(phases,
                                                                                 positions))):
        y = add("subtensor", [y], index=tuple((2 + i, ph.crop, ph.crop + m, None, None)
                                              for i, (ph, m) in enumerate(zip(phases,
                                                                              positions))))
    return y


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
    elif nd == 2 and not grouped:
        return (_per_phase(x, w, stride, padding, out_sp, add, new),)
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
