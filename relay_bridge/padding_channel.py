"""MegEngine's PaddingChannelPass as enable_nchw88 / enable_nchw44 / enable_nchw44_dot run
it before the layout change (only_padding_weights=True): convolution weights get zero
output channels up to a multiple of the pack size, so the blocked layout fits layers
whose channel counts do not.

Following MegEngine 1.13 (src/gopt/impl/padding_channel.cpp), on the NCHW graph:
- a dense convolution pads its weight's output channels (and its bias) up to a multiple
  of p; its input channels only where its input is already padded (the graph input is
  never padded: a 3-channel first convolution stays 3 wide, MegEngine's hybrid case);
- a depthwise convolution of a padded input pads its groups; a grouped one is never
  padded (its padded input is cut back);
- pooling, adaptive pooling and resize of a padded input stay padded;
- an Elemwise/TypeCvt/PowC stays padded when every non-scalar input is padded to the
  same count, otherwise its padded inputs are cut back; a Reduce that keeps its
  dims and does not reduce the channels stays padded;
- every other op, and every graph output, gets the padded tensor cut back to its
  channels (a Subtensor on axis 1, as MegEngine writes it).
Padding channels are zeros in the weights, so the extra channels carry bias-only values
that nothing reads but the cut."""
from __future__ import annotations

import numpy as np

from megtrace.ir import Graph, Var
from megtrace.ops import MgeOpr, get

_ELEMWISE_TYPES = ("Elemwise", "TypeCvtV2", "PowC", "ElemwiseMultiType")
_FORMAT_AWARE = ("pool2d", "adaptive_pool2d", "resize")


def padding(channels: int, p: int) -> int:
    """Channels MegEngine adds to reach a multiple of p (its padding_4 / padding_8)."""
    return (p - channels % p) % p


def _pad_axis(value: np.ndarray, axis: int, extra: int) -> np.ndarray:
    width = [(0, 0)] * value.ndim
    width[axis] = (0, extra)
    return np.pad(value, width)


def _is_elemwise(op) -> bool:
    return isinstance(op.mge, MgeOpr) and op.mge.type in _ELEMWISE_TYPES


def _is_scalar(v: Var) -> bool:
    return v.type.ndim <= 1 and v.type.size == 1


class _Padder:
    def __init__(self, graph: Graph, p: int):
        self.g, self.p = graph, p
        self.new = Graph(list(graph.inputs), dict(graph.consts), [], [],
                         list(graph.input_names))
        self.remap: dict[Var, Var] = {}
        self.padded: dict[Var, int] = {}       # padded var -> its real channel count
        self._cut: dict[Var, Var] = {}

    def value(self, v: Var) -> Var:
        return self.remap.get(v, v)

    def cut(self, v: Var) -> Var:
        """v back to its real channels (itself when it is not padded)."""
        if v not in self.padded:
            return v
        if v not in self._cut:
            (self._cut[v],) = self.new.add_node(get("subtensor"), [v], {
                "index": ((1, None, self.padded[v], None, None),)}, v.name_hint)
        return self._cut[v]

    def const(self, v: Var):
        return self.new.consts.get(v)

    def add(self, node, ins, params=None, channels: int | None = None):
        outs = self.new.add_node(node.op, ins, dict(node.kwargs) if params is None else params,
                                 node.outputs[0].name_hint)
        if channels is not None:
            self.padded[outs[0]] = channels
        self.remap.update(zip(node.outputs, outs))

    # -- per op ----------------------------------------------------------------------------
    def conv(self, node, ins) -> bool:
        w = self.const(ins[1])
        bias = ins[2] if len(ins) > 2 else None
        b = self.const(bias) if bias is not None else None
        if w is None or (bias is not None and (b is None or b.shape[2:] != (1, 1))):
            return False
        x = ins[0]
        if w.ndim == 5:
            if w.shape[1:3] != (1, 1) or x not in self.padded:
                return False              # grouped (never padded) or nothing to follow
            extra = x.type.shape[1] - w.shape[0]
            if not extra:
                return False
            args = [x, self.new.add_const(_pad_axis(w, 0, extra), ins[1].name_hint)]
            if b is not None:
                args.append(self.new.add_const(_pad_axis(b, 1, extra), bias.name_hint))
            self.add(node, args, channels=self.padded[x])
            return True
        if x in self.padded:
            w = _pad_axis(w, 1, x.type.shape[1] - w.shape[1])
        extra = padding(w.shape[0], self.p)
        if extra:
            w = _pad_axis(w, 0, extra)
        if not extra and x not in self.padded:
            return False
        args = [x, self.new.add_const(w, ins[1].name_hint)]
        if b is not None:
            args.append(self.new.add_const(_pad_axis(b, 1, extra), bias.name_hint))
        self.add(node, args, channels=node.outputs[0].type.shape[1] if extra else None)
        return True

    def elemwise(self, node, ins) -> bool:
        shaped = [v for v in ins if not _is_scalar(v)]
        if not any(v in self.padded for v in shaped):
            return False
        widths = {v.type.shape[1] if v.type.ndim == 4 else None for v in shaped}
        if not all(v in self.padded for v in shaped) or len(widths) != 1:
            return False
        self.add(node, ins, channels=self.padded[next(v for v in shaped)])
        return True

    def reduce(self, node, ins) -> bool:
        kw = node.kwargs
        axes = kw["axis"] if isinstance(kw["axis"], tuple) else (kw["axis"],)
        if ins[0] not in self.padded or not kw.get("keepdims") or None in axes or \
                any(a % 4 == 1 for a in axes):
            return False
        self.add(node, ins, channels=self.padded[ins[0]])
        return True

    def node(self, node) -> None:
        ins = [self.value(v) for v in node.inputs]
        name = node.op.name
        if name in ("conv2d", "conv_bias") and self.conv(node, ins):
            return
        if name in _FORMAT_AWARE and ins[0] in self.padded:
            self.add(node, ins, channels=self.padded[ins[0]])
            return
        if _is_elemwise(node.op) and self.elemwise(node, ins):
            return
        if name == "reduce" and self.reduce(node, ins):
            return
        self.add(node, [self.cut(v) for v in ins])

    def run(self) -> Graph:
        for node in self.g.nodes:
            self.node(node)
        self.new.set_outputs([self.cut(self.value(v)) for v in self.g.outputs],
                             self.g.output_names)
        return self.new.prune()


def pad_channels(graph: Graph, pack: int) -> Graph:
    """The graph with MegEngine's channel padding for a pack of 4 (NCHW44) or 8 (NCHW88)."""
    if pack not in (4, 8):
        raise ValueError(f"padding_channel: pack must be 4 or 8; got {pack}")
    return _Padder(graph, pack).run()
