"""What MegEngine's layout passes share, on a megtrace graph: a copy of the graph in which
some values live in another layout (NCHWxx blocks, NHWCD4 images). Each op either takes
its inputs in that layout or gets them back as NCHW, converted once per value at the
edges; constants are re-laid-out at build time; the graph's outputs leave as NCHW.
Subclasses say how a value is converted each way and how each op is rewritten."""
from __future__ import annotations

from typing import Any

import numpy as np

from megtrace.ir import Graph, Node, Var


class LayoutRewriter:
    def __init__(self, graph: Graph):
        self.g = graph
        self.new = Graph(list(graph.inputs), {}, [], [], list(graph.input_names))
        self.remap: dict[Var, Var] = {}
        self.converted: set[Var] = set()          # values of `new` in the layout
        self._nchw: dict[Var, Var] = {}
        self._to_layout: dict[Var, Var] = {}

    # -- what a layout defines -------------------------------------------------------------
    def convert_const(self, value: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def emit_to_layout(self, v: Var) -> Var:
        raise NotImplementedError

    def emit_to_nchw(self, v: Var) -> Var:
        raise NotImplementedError

    def node(self, node: Node) -> None:
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------
    def value(self, v: Var) -> Var:
        return self.remap.get(v, v)

    def const(self, v: Var) -> Any:
        return self.new.consts.get(v)

    def nchw(self, v: Var) -> Var:
        """v as NCHW (converted back once when it is in the layout)."""
        if v not in self.converted:
            return v
        if v not in self._nchw:
            self._nchw[v] = self.emit_to_nchw(v)
        return self._nchw[v]

    def to_layout(self, v: Var) -> Var:
        """v in the layout (a constant re-laid-out, a value converted once)."""
        if v in self.converted:
            return v
        if v not in self._to_layout:
            value = self.const(v)
            out = self.new.add_const(self.convert_const(value), v.name_hint) \
                if value is not None else self.emit_to_layout(v)
            self.converted.add(out)
            self._to_layout[v] = out
        return self._to_layout[v]

    def add(self, node: Node, op, ins, params, converted: bool) -> None:
        outs = self.new.add_node(op, ins, params, node.outputs[0].name_hint)
        if converted:
            self.converted.update(outs)
        self.remap.update(zip(node.outputs, outs))

    def keep_nchw(self, node: Node, ins) -> None:
        self.add(node, node.op, [self.nchw(v) for v in ins], dict(node.kwargs), converted=False)

    def run(self) -> Graph:
        for var, value in self.g.consts.items():
            self.new.consts[var] = value
        for node in self.g.nodes:
            self.node(node)
        outs = [self.nchw(self.value(v)) for v in self.g.outputs]
        self.new.set_outputs(outs, self.g.output_names)
        return self.new.prune()
