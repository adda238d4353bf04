"""MegEngine's ConvertFormatPass (optimize_for_inference's enable_hwcd4) on a megtrace graph:
convolutions and what follows them compute in the NHWCD4 image layout (N, H, C/4, W, 4),
RelayoutFormat oprs at its edges.

Following MegEngine 1.13 (src/gopt/impl/inference.cpp, make_nhwcd4_converter; the
PaddingChannelPass MegEngine runs before it has no convolution rule for NHWCD4, so no
channel is padded):
- a convolution of an NCHW input is converted when its output channels per group are a
  multiple of 4 and (dense, or) its input channels per group are too -- the input goes
  through RelayoutFormat NCHW_NHWCD4I, which pads a 3-channel image to 4; a depthwise
  one of an NCHW input is not (1 output channel per group);
- a convolution of an NHWCD4 input stays NHWCD4 unless its output channels per group are
  not a multiple of 4 (and it is not depthwise): then its input goes back to NCHW;
- pooling stays NCHW when its input is NCHW with channels not a multiple of 4, and is
  NHWCD4 otherwise;
- an Elemwise whose inputs are all NHWCD4, scalars or 4-d with channels a multiple of 4
  is NHWCD4 (the 4-d ones relayouted); a Concat of NHWCD4 inputs along N, C or H is one
  along the NHWCD4 axis; everything else gets NCHW inputs (RelayoutFormat NHWCD4I_NCHW),
  and so do the graph's outputs.
Weights, biases and other constants are re-laid-out here (MegEngine's ParamFuse); the
writer stores the convolutions' ones with the Image2DPack4 format. MegEngine hands an NHWCD4
value as it is to oprs its pass does not list (AdaptivePooling, ...) and then fails
(tests/data/megengine_layout_models.json, BlockNet); megtrace gives them NCHW inputs."""
from __future__ import annotations

from megtrace.ir import Graph, Var
from megtrace.ops import MgeOpr, get
from megtrace.ops.nhwcd4 import to_cd4, weight_to_cd4

from .layout_rewriter import LayoutRewriter

# NCHW axis -> NHWCD4 axis for a Concat (MegEngine refuses W: axis 3)
_CONCAT_AXIS = {0: 0, 1: 2, 2: 1}


def _is_elemwise(op) -> bool:
    return isinstance(op.mge, MgeOpr) and op.mge.type == "Elemwise"


class _Rewriter(LayoutRewriter):
    def convert_const(self, value):
        return to_cd4(value)

    def emit_to_nchw(self, v: Var) -> Var:
        (out,) = self.new.add_node(get("relayout_format"), [v], {"mode": "NHWCD4I_NCHW"},
                                   v.name_hint)
        return out

    def emit_to_layout(self, v: Var) -> Var:
        (out,) = self.new.add_node(get("relayout_format"), [v], {"mode": "NCHW_NHWCD4I"},
                                   v.name_hint)
        return out

    # -- per op ----------------------------------------------------------------------------
    def conv(self, node, ins) -> bool:
        w = self.const(ins[1])
        if w is None:
            return False
        x = ins[0]
        if w.ndim == 5 and w.shape[0] == 1:      # a one-group convolution is a dense one
            w = w[0]
        if w.ndim == 4:
            kind, ocpg, icpg, group = "dense", w.shape[0], w.shape[1], 1
        else:
            group, ocpg, icpg = w.shape[:3]
            kind = "channel" if ocpg == icpg == 1 else "group"
        if x in self.converted:
            if ocpg % 4 and kind != "channel":
                return False
        elif ocpg % 4 or (icpg % 4 and group != 1):
            return False
        args = [self.to_layout(x), self.new.add_const(weight_to_cd4(w, kind), ins[1].name_hint)]
        if node.op.name == "conv_bias":
            b = ins[2]
            args.append(self.to_layout(b) if b.type.ndim == 4 else b)
        name = "conv_bias_nhwcd4" if node.op.name == "conv_bias" else "conv2d_nhwcd4"
        params = {**node.kwargs, "sparse": "DENSE" if kind == "dense" else "GROUP"}
        self.add(node, get(name), args, params, converted=True)
        return True

    def pool(self, node, ins) -> bool:
        x = ins[0]
        if x not in self.converted and x.type.shape[1] % 4:
            return False
        self.add(node, get("pool2d_nhwcd4"), [self.to_layout(x)], dict(node.kwargs), converted=True)
        return True

    def _fits(self, v: Var) -> bool:
        return v in self.converted or (v.type.ndim == 4 and v.type.shape[1] % 4 == 0) or \
            (v.type.ndim <= 1 and v.type.size == 1)

    def elemwise(self, node, ins) -> bool:
        if not all(self._fits(v) for v in ins):
            return False
        args = [self.to_layout(v) if v.type.ndim == 4 else v for v in ins]
        self.add(node, node.op, args, dict(node.kwargs), converted=True)
        return True

    def concat(self, node, ins) -> bool:
        axis = node.kwargs["axis"]
        if not all(v in self.converted for v in ins) or not -4 <= axis < 4 or axis % 4 == 3:
            return False
        self.add(node, node.op, ins, {**node.kwargs, "axis": _CONCAT_AXIS[axis % 4]},
                 converted=True)
        return True

    def node(self, node) -> None:
        ins = [self.value(v) for v in node.inputs]
        name = node.op.name
        if name in ("conv2d", "conv_bias") and self.conv(node, ins):
            return
        if name == "pool2d" and ins[0].type.ndim in (4, 5) and self.pool(node, ins):
            return
        if _is_elemwise(node.op) and self.elemwise(node, ins):
            return
        if name == "concat" and self.concat(node, ins):
            return
        self.keep_nchw(node, ins)


def convert_to_nhwcd4(graph: Graph) -> Graph:
    """The graph with MegEngine's NHWCD4 layout."""
    return _Rewriter(graph).run()
