"""MegEngine's EnableNchwxxPass on a megtrace graph (optimize_for_inference's enable_nchw88
and enable_nchw44 / enable_nchw44_dot): convolutions whose channels allow it compute in
the blocked layout (N, C/p, H, W, p) and activations stay blocked between them.

Following MegEngine 1.13 (src/gopt/impl/tensor_reformat.cpp, dnn nchw_nchwxx_valid.h):
- a dense convolution with IC and OC multiples of p is blocked ("dense"); one with IC < p
  and OC a multiple of p keeps its NCHW input ("hybrid", MegEngine's is_nchw_nchwxx_
  optimized rules); a depthwise one with G a multiple of p is "channel", a grouped one
  with both per-group counts multiples of p is "group"; any other stays NCHW;
- pooling, adaptive pooling and resize of a blocked input are blocked; an Elemwise/
  TypeCvt or a Concat with a blocked input stays blocked when every other input is a
  scalar or has a multiple of p channels (those are blocked too), otherwise its blocked
  inputs go back to NCHW;
- every other op gets NCHW inputs (Dimshuffle + Reshape, as MegEngine writes its
  relayouts), and so do the graph's outputs.
Weights, biases and other constants are re-laid-out here, as MegEngine's ParamFuse does.
MegEngine's PaddingChannelPass runs first (padding_channel.py), so most channel counts
are multiples of p here."""
from __future__ import annotations

import numpy as np

from megtrace.ir import Graph, Var
from megtrace.ops import MgeOpr, get
from megtrace.ops.nchwxx import to_blocked, weight_to_blocked

from .layout_rewriter import LayoutRewriter

_ELEMWISE_TYPES = ("Elemwise", "TypeCvtV2", "PowC", "ElemwiseMultiType")
# NCHW ops whose blocked form (megtrace/ops/nchwxx.py) takes a blocked input as is
_BLOCKED_FORMS = {"pool2d": "pool2d_nchwxx", "adaptive_pool2d": "adaptive_pool2d_nchwxx",
                  "resize": "resize_nchwxx"}


def _is_elemwise(op) -> bool:
    return isinstance(op.mge, MgeOpr) and op.mge.type in _ELEMWISE_TYPES



def _hybrid_ok(node, w_shape, p: int) -> bool:
    """MegEngine's nchw_nchwxx_valid for float32 (NCHW88 / NCHW44_FP32)."""
    kw = node.kwargs
    oc, icpg, fh, fw = w_shape
    if icpg >= p or oc % p or kw["dilation"] != (1, 1):
        return False
    if p == 4:
        stride = kw["stride"]
        return (fh == fw and fh in (2, 3, 5, 7) and stride[0] == stride[1] and
                (stride[0] == 1 or stride[1] == 2) and
                kw.get("nonline", "IDENTITY") in ("IDENTITY", "RELU", "H_SWISH"))
    return True


def conv_case(node, w_shape: tuple, p: int) -> str | None:
    """Which blocked case MegEngine gives this NCHW convolution, or None (stays NCHW)."""
    if len(w_shape) == 4:
        oc, ic = w_shape[:2]
        if ic % p == 0 and oc % p == 0:
            return "dense"
        return "hybrid" if _hybrid_ok(node, w_shape, p) else None
    g, ocg, icg = w_shape[:3]
    if icg == ocg == 1 and g % p == 0:
        return "channel"
    if icg % p == 0 and ocg % p == 0:
        return "group"
    return None


class _Rewriter(LayoutRewriter):
    def __init__(self, graph: Graph, p: int):
        super().__init__(graph)
        self.p = p

    def _dims(self, v: Var, picks: tuple) -> Var:
        """A run-time shape for a reshape of v: each pick is an axis of v's shape (read by
        GetVarShape/Subtensor, so the file keeps any batch size, as MegEngine's relayouts
        do), (axis, factor) for that dimension times a constant, or an np.int32 constant."""
        (shape,) = self.new.add_node(get("shape_of"), [v])
        parts = []
        for pick in picks:
            if isinstance(pick, np.integer):
                parts.append(self.new.add_const(np.array(pick, np.int32)))
                continue
            axis, factor = pick if isinstance(pick, tuple) else (pick, 1)
            (dim,) = self.new.add_node(get("subtensor"), [shape],
                                       {"index": ((0, None, None, None, axis),)})
            if factor != 1:
                # its own opr, as in MegEngine's file (not merged with an equal index)
                factor_var = self.new.add_const(np.array(factor, np.int32), "nchwxx_pack")
                (dim,) = self.new.add_node(get("mul"), [dim, factor_var])
            parts.append(dim)
        (out,) = self.new.add_node(get("make_shape"), parts)
        return out

    def convert_const(self, value):
        return to_blocked(value, self.p)

    def emit_to_nchw(self, v: Var) -> Var:
        """Dimshuffle + Reshape, as MegEngine writes the relayout."""
        n, cb, h, w, p = v.type.shape
        (t,) = self.new.add_node(get("transpose"), [v], {"pattern": (0, 1, 4, 2, 3)})
        shape = self._dims(t, (0, (1, p), 3, 4))
        (out,) = self.new.add_node(get("reshape"), [t, shape], {"shape": (n, cb * p, h, w)},
                                   v.name_hint)
        return out

    def emit_to_layout(self, v: Var) -> Var:
        """A 4-d v (channels a multiple of p): Reshape + Dimshuffle."""
        n, c, h, w = v.type.shape
        shape = self._dims(v, (0, np.int32(c // self.p), np.int32(self.p), 2, 3))
        (r,) = self.new.add_node(get("reshape"), [v, shape],
                                 {"shape": (n, c // self.p, self.p, h, w)})
        (out,) = self.new.add_node(get("transpose"), [r], {"pattern": (0, 1, 3, 4, 2)},
                                   v.name_hint)
        return out

    # -- per op ----------------------------------------------------------------------------
    def conv(self, node, ins) -> bool:
        w = self.const(ins[1])
        if w is None:
            return False
        case = conv_case(node, w.shape, self.p)
        if case is None:
            return False
        x = ins[0] if case == "hybrid" else self.to_layout(ins[0])
        if case == "hybrid" and x in self.converted:
            return False
        args = [x, self.new.add_const(weight_to_blocked(w, case, self.p), ins[1].name_hint)]
        if node.op.name == "conv_bias":
            b = ins[2]
            args.append(self.to_layout(b) if b.type.ndim == 4 else b)
        op = get("conv_bias_nchwxx" if node.op.name == "conv_bias" else "conv2d_nchwxx")
        self.add(node, op, args, dict(node.kwargs), converted=True)
        return True

    def elemwise(self, node, ins, params=None) -> bool:
        """MegEngine's replace_multi_inp_opr (Elemwise, TypeCvt, Concat, ...)."""
        if not any(v in self.converted for v in ins):
            return False
        fits = all(v in self.converted or v.type.size == 1 or
                   (v.type.ndim == 4 and v.type.shape[1] % self.p == 0) for v in ins)
        if not fits:
            return False
        args = [v if v in self.converted or v.type.size == 1 else self.to_layout(v) for v in ins]
        self.add(node, node.op, args, dict(node.kwargs) if params is None else params,
                 converted=True)
        return True

    def concat(self, node, ins) -> bool:
        """Blocked inputs concatenate along the same axis (C/p for the channels)."""
        axis = node.kwargs["axis"]
        if not all(v.type.ndim == 4 or v in self.converted for v in ins) or not -4 <= axis < 4:
            return False
        return self.elemwise(node, ins, {**node.kwargs, "axis": axis % 4})

    def reduce(self, node, ins) -> bool:
        kw = node.kwargs
        axes = kw["axis"] if isinstance(kw["axis"], tuple) else (kw["axis"],)
        if ins[0] not in self.converted or not kw["keepdims"] or \
                not set(axes) <= {2, 3, -2, -3}:
            return False
        axes = tuple(a % 4 for a in axes)
        self.add(node, node.op, ins, {**kw, "axis": axes}, converted=True)
        return True

    def node(self, node) -> None:
        ins = [self.value(v) for v in node.inputs]
        name = node.op.name
        if name in ("conv2d", "conv_bias") and self.conv(node, ins):
            return
        if name in _BLOCKED_FORMS and ins[0] in self.converted:
            self.add(node, get(_BLOCKED_FORMS[name]), ins, dict(node.kwargs), converted=True)
            return
        if _is_elemwise(node.op) and self.elemwise(node, ins):
            return
        if name == "concat" and self.concat(node, ins):
            return
        if name == "reduce" and self.reduce(node, ins):
            return
        self.keep_nchw(node, ins)


def convert_to_nchwxx(graph: Graph, pack: int) -> Graph:
    """The graph with MegEngine's NCHW88 (pack 8) or NCHW44 (pack 4) layout."""
    if pack not in (4, 8):
        raise ValueError(f"nchwxx: pack must be 4 or 8; got {pack}")
    return _Rewriter(graph, pack).run()
