"""MegEngine's FuseWarpPerspectiveDimshufflePass (optimize_for_inference's
enable_fuse_preprocess) on a megtrace graph: a WarpPerspective of a uint8 NCHW image read
only by a TypeCvt to float32 becomes one WarpPerspective whose output dtype is float32 --
the interpolated values written as floats, not rounded to uint8 first (megdnn's naive
kern_naive_dimshuffle_typecvt), as MegEngine's fused opr computes them
(src/gopt/impl/fuse_nchw4_int8_preprocess.cpp). Its NHWC pattern -- a uint8 NHWC warp
read only by a Dimshuffle to NCHW read only by a TypeCvt to float32 -- becomes one
WarpPerspective of format NHWC_NCHW (the naive kernel's float interpolation, not the
NHWC warp's OpenCV fixed point). Its other patterns end in a RelayoutFormat to quantized
int8 NCHW4, which float graphs do not have."""
from __future__ import annotations

import collections

from megtrace.ir import Graph
from megtrace.ops import get


def fuse_warp_typecvt(graph: Graph) -> Graph:
    """The graph with every uint8 warp_perspective + astype(float32) pair fused."""
    readers: collections.Counter = collections.Counter(v for n in graph.nodes for v in n.inputs)
    readers.update(graph.outputs)
    warp, astype, transpose = get("warp_perspective"), get("astype"), get("transpose")
    producer = {v: n for n in graph.nodes for v in n.outputs}

    def nhwc_warp(node):
        """The NHWC uint8 warp under a Dimshuffle to NCHW (each read once), or None."""
        if node is None or node.op is not transpose or \
                tuple(node.kwargs.get("pattern", ())) != (0, 3, 1, 2) or \
                readers[node.inputs[0]] != 1:
            return None
        src = producer.get(node.inputs[0])
        if src is None or src.op is not warp or src.kwargs.get("format") != "NHWC" or \
                src.inputs[0].type.dtype != "uint8":
            return None
        return src

    def rule(node, ins, new, remap):
        if node.op is not astype or node.kwargs.get("dtype") != "float32":
            return None
        src = nhwc_warp(producer.get(node.inputs[0])) if readers[node.inputs[0]] == 1 else None
        if src is not None:
            warp_ins = [remap.get(v, v) for v in src.inputs]
            return new.add_node(warp, warp_ins, {**src.kwargs, "format": "NHWC_NCHW",
                                                 "dtype": "float32"},
                                node.outputs[0].name_hint)
        src = producer.get(node.inputs[0])
        if src is None or src.op is not warp or readers[node.inputs[0]] != 1 or \
                src.inputs[0].type.dtype != "uint8" or src.kwargs.get("dtype") is not None or \
                src.kwargs.get("format", "NCHW") != "NCHW":
            return None
        warp_ins = [remap.get(v, v) for v in src.inputs]
        return new.add_node(warp, warp_ins, {**src.kwargs, "dtype": "float32"},
                            node.outputs[0].name_hint)

    return graph.rewrite(rule)
