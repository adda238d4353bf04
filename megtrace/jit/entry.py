"""What one trace of a function leaves behind: the graph, the op tape replays are
checked against, where every outside value came from, and the compiled graph."""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import Graph, Var
from ..ops import OpDef


# Marks, in `TraceEntry.replay_checks`, an input fed on every call: the value its tensor
# holds now is what the compiled graph gets, whatever object holds it and however often
# it changed (MegEngine checks only that it is external, of the traced dtype and shape).
FEED = object()


@dataclass
class TapeItem:
    """One op application, in call order (folded ones too)."""

    op: OpDef
    params: tuple
    inputs: tuple[Var, ...]
    outputs: tuple[Var, ...]
    where: str = "<unknown>"       # the user's file:line that applied it
    raw_params: dict | None = None  # the params as given (SymInts as ints): a replay's
    #                                 params equal to these bind to `params` (fast check)

    def describe(self, index: int) -> str:
        return f"op #{index + 1} ({self.op.name}) traced at {self.where}"


@dataclass
class Source:
    """A value that came from outside the traced ops.

    kind: "arg" (a tensor argument), "const" (created inside the function), "captured"
    (an outside tensor frozen by capture_as_const), "external" (an outside tensor that
    stays an input of the compiled graph), "fed" (created inside the function and fed
    anew on every call: dispatch.trace_input), "rng" (the key of a megtrace.random op: an
    input of the compiled graph drawn from `stream`, the op's OprKeys, on every run).
    """

    kind: str
    tensor: Any = None          # weakref to the outside tensor (captured/external)
    version: int = 0
    stream: Any = None          # rng: the generator keys are drawn from
    value: Any = None           # rng: the key drawn while tracing (a dump freezes it)

    def outside(self):
        return self.tensor() if self.tensor is not None else None


@dataclass
class TraceEntry:
    full_graph: Graph                              # every recorded node, unpruned
    tape: list[TapeItem]
    sources: dict[Var, Source]
    args: list[tuple[str, Var]]                    # tensor arguments by mark (arg_0, kwarg_x)
    externals: list[Var]
    out_vars: list[Var]
    out_tree: Any
    value_required: set[Var] = field(default_factory=set)
    compiled: Any = None
    exec_outputs: list[Var] = field(default_factory=list)
    target: Any = None                             # from the inputs' device when not given
    simplify: bool = False                         # opt_level >= 1: MegEngine's arith rules
    symbolic_shape: bool = True                    # Tensor.shape gave SymInts while tracing
    shape_tensors: dict = field(default_factory=dict)   # tensor(x.shape) by expression
    shape_values: dict = field(default_factory=dict)    # shape-arithmetic values used as shapes
    assigned: list = field(default_factory=list)   # Vars the function assigned to outside tensors
    undumpable: list = field(default_factory=list)  # reasons dump() refuses (note_undumpable)
    # (ops recorded before, user file:line) where Python read a traced value (jit/hints.py)
    value_reads: list[tuple[int, str]] = field(default_factory=list)
    dims: dict = field(default_factory=dict)       # Var -> its SymShape, shared by replays
    _captured: list | None = None                  # per tape item, see replay_checks()
    # gradient rules' ops as replays applied them (autodiff/recipes.py), by node
    vjp_recipes: dict = field(default_factory=dict)
    _reads_seen: int = 0                           # len(value_required) at the last refresh

    def replay_checks(self) -> list[tuple]:
        """Per tape item: (op, raw_params, ((input var, captured), ...), outputs), where
        `captured` is (weakref, version) of the captured outside tensor the input was
        traced on, (FEED, (shape, dtype)) for an input the graph is fed on every call
        (an "external" outside tensor: a parameter, a momentum buffer, BatchNorm's
        running statistics, which a traced training step itself assigns every call; a
        "fed" one: an optimizer's lr), (None, (shape, value)) for a one-element constant
        (`x / 8.0`: the value as a Python number), else None; precomputed once so that a
        replay checks an op, recognises an unchanged module parameter, feeds an outside
        tensor and compares a scalar constant without looking anything up."""
        if self._captured is None:
            def check(var):
                source = self.sources.get(var)
                if source is None:
                    return None
                if source.kind == "captured":
                    return (source.tensor, source.version)
                if source.kind in ("external", "fed") and var.type.quant is None:
                    return (FEED, (var.type.shape, np.dtype(var.type.dtype)))
                if source.kind == "const":
                    value = self.const_value(var)
                    if value is not None and value.size == 1 and value.dtype.kind in "biuf" \
                            and not value.dtype.metadata:
                        return (None, (value.shape, value.item()))
                return None
            self._captured = [
                (item.op, item.raw_params, tuple((v, check(v)) for v in item.inputs),
                 item.outputs) for item in self.tape]
        return self._captured

    def const_value(self, var: Var) -> np.ndarray | None:
        return self.full_graph.consts.get(var)

    @property
    def graph(self) -> Graph:
        """The graph of the declared outputs only (what dump writes)."""
        return self._optimized(self.full_graph.with_outputs(
            self.out_vars, [f"output_{i}" for i in range(len(self.out_vars))]))

    def _optimized(self, graph: Graph) -> Graph:
        if not self.simplify:
            return graph
        from .arith_simplify import simplify_arith
        return simplify_arith(graph)

    def __post_init__(self):
        # `value_required` stays the recorder's own set: Python may read traced values
        # after the tracing call returns (param.grad after a traced training step), and
        # MegEngine keeps those readable too (see refresh_outputs)
        self.refresh_outputs()

    def reads_since_build(self) -> bool:
        """Whether Python read values the outputs do not hold yet (cheap: reads only grow)."""
        return len(self.value_required) != self._reads_seen

    def refresh_outputs(self) -> bool:
        """Make `exec_outputs` the declared outputs plus every value Python has read so
        far; True when that added values, so a compiled graph must be built again."""
        self._reads_seen = len(self.value_required)
        known = set(self.exec_outputs)
        new = [v for v in (*self.assigned, *self.value_required)
               if v not in known and v not in self.full_graph.consts
               and v not in self.full_graph.inputs and v not in self.out_vars]
        if not self.exec_outputs:
            self.exec_outputs = list(self.out_vars)
        elif not new:
            return False
        self.exec_outputs += list(dict.fromkeys(new))
        return bool(new)

    def exec_graph(self) -> Graph:
        """The graph that runs: declared outputs plus values read from Python while tracing
        (its outputs are `exec_outputs`, in order, possibly as other Vars once simplified),
        with static shapes: it is compiled for these input shapes. A graph holding a
        value-shaped op keeps its run-time shape inputs instead: it runs on the NumPy
        interpreter, and a shape read from a value-shaped result (F.full((y.shape[0], 1),
        0) after y = x[mask]) must follow each call's count."""
        n = len(self.out_vars)
        names = [f"output_{i}" for i in range(n)] + \
            [f"required_{i}" for i in range(len(self.exec_outputs) - n)]
        graph = self.full_graph.with_outputs(self.exec_outputs, names)
        if not any(node.op.value_shaped for node in graph.nodes):
            graph = graph.without_shape_inputs()
        return self._optimized(graph)


def weak(t) -> Any:
    return weakref.ref(t)


def materialize(t, value, fresh: bool = False) -> None:
    """An outside tensor the traced function assigned becomes a plain tensor holding the
    value the trace computed for it (MegEngine: the parameter after the step). `fresh`:
    `value` is an output of this call's compiled run, taken without a copy (tensor values
    are never written in place; a training step assigns every parameter and optimizer
    slot, and copying them again cost as much as the copy out of the VM)."""
    t._value = np.asarray(value) if fresh and isinstance(value, np.ndarray) else np.array(value)
    t._var, t._owner = None, None
    t._version += 1
