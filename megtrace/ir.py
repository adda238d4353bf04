"""The graph IR that `trace` records, TVM lowers, and the .mge writer/reader speak.

A `Graph` is a flat list of `Node`s in topological order over SSA `Var`s, with inputs
and constants as graph attributes (no placeholder nodes), in the spirit of jaxprs.
Every node is type-checked by its operator's shape rule when it is added, so a graph
is well-typed as it is built; nodes whose inputs are all constants are folded on the
spot (MegEngine's static value inference does the same when it builds a graph).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from . import dtype as _dt
from . import graph_view as _view
from .errors import ShapeError

if TYPE_CHECKING:
    from .ops.registry import OpDef


# Constant nodes are folded at build time unless their result is larger than this many
# elements (a corrupt model file must not make the loader allocate gigabytes).
FOLD_LIMIT = 1 << 24
# MegEngine's and TVM's kernels index one dimension with a signed 32-bit integer.
MAX_DIM = (1 << 31) - 1


@dataclass(frozen=True)
class TensorType:
    """A static shape and a dtype name; printed as `f32[1,3,32,32]`."""

    shape: tuple[int, ...]
    dtype: str
    # MegEngine's quantized dtype of the value (stored as `dtype`, its storage), else None;
    # given a quantized NumPy dtype as `dtype`, it is taken from it
    quant: _dt.QuantParam | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if isinstance(self.dtype, _dt.QuantParam):        # a file's quantized dtype
            object.__setattr__(self, "quant", self.dtype)
            object.__setattr__(self, "dtype", self.dtype.storage)
        elif self.quant is None and getattr(self.dtype, "metadata", None):
            object.__setattr__(self, "quant", _dt.QuantParam.of(self.dtype))
        object.__setattr__(self, "dtype", _dt.canonical(self.dtype))
        if any(d < 0 for d in self.shape):
            raise ShapeError(f"TensorType: negative dimension in shape {self.shape}")
        if any(d > MAX_DIM for d in self.shape):
            raise ShapeError(f"TensorType: dimension larger than {MAX_DIM} in shape "
                             f"{self.shape}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @classmethod
    def of(cls, array: np.ndarray) -> "TensorType":
        return cls(array.shape, array.dtype)

    @property
    def np_dtype(self) -> np.dtype:
        """The NumPy dtype of the values (quantized dtypes with their metadata)."""
        return self.quant.np_dtype() if self.quant is not None else np.dtype(self.dtype)

    def __str__(self) -> str:
        short = str(self.quant) if self.quant is not None else _dt.info(self.dtype).short
        return f"{short}[{','.join(map(str, self.shape))}]"


class Var:
    """An SSA value. Identity is the object; names are hints resolved by `Graph.names()`."""

    __slots__ = ("type", "name_hint", "__weakref__")

    def __init__(self, type: TensorType, name_hint: str = ""):
        self.type = type
        self.name_hint = name_hint

    def __repr__(self) -> str:
        return f"Var({self.name_hint or id(self):}: {self.type})"


@dataclass(frozen=True, eq=False)
class Node:
    op: "OpDef"
    inputs: tuple[Var, ...]
    params: tuple[tuple[str, Any], ...]
    outputs: tuple[Var, ...]

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.params)

    def __str__(self) -> str:
        args = ", ".join(v.name_hint or "?" for v in self.inputs)
        ps = "".join(f", {k}={v!r}" for k, v in self.params)
        return f"{self.op.name}({args}{ps})"


@dataclass(eq=False)
class Graph:
    inputs: list[Var] = field(default_factory=list)
    consts: dict[Var, np.ndarray] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[Var] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)

    # -- building -------------------------------------------------------------------
    def add_input(self, type: TensorType, name: str) -> Var:
        var = Var(type, name)
        self.inputs.append(var)
        self.input_names.append(name)
        return var

    def add_const(self, value, name_hint: str = "", dtype=None) -> Var:
        array = _dt.as_array(value, dtype)
        var = Var(TensorType.of(array), name_hint)
        self.consts[var] = array
        return var

    def add_node(self, op: "OpDef", inputs: Sequence[Var], params: dict[str, Any] | None = None,
                 name_hint: str = "", out_types: Sequence[TensorType] | None = None
                 ) -> tuple[Var, ...]:
        """Append `op(*inputs, **params)`; fold it if every input is a constant.
        `out_types` overrides the shape rule (a value_shaped op's recorded shapes)."""
        bound = op.bind(params or {})
        kwargs = dict(bound)
        rule_types = op.infer_types([v.type for v in inputs], kwargs)
        out_types = tuple(out_types) if out_types is not None else rule_types
        small = sum(t.size for t in out_types) <= FOLD_LIMIT
        if op.fold_from_types or (small and inputs and not op.random and
                                  all(v in self.consts for v in inputs)):
            values = op.run_eager([self._value_for_fold(op, v) for v in inputs], kwargs)
            return tuple(self.add_const(val, name_hint, t.np_dtype if t.quant else t.dtype)
                         for val, t in zip(values, out_types))
        outs = tuple(Var(t, name_hint if len(out_types) == 1 else f"{name_hint}:o{i}")
                     for i, t in enumerate(out_types))
        self.nodes.append(Node(op, tuple(inputs), bound, outs))
        return outs

    def _value_for_fold(self, op: "OpDef", var: Var) -> np.ndarray:
        if var in self.consts:
            return self.consts[var]
        # Shape-only ops read nothing but the shape: a zero-stride view costs no memory.
        zero = np.zeros((), var.type.dtype)
        return np.lib.stride_tricks.as_strided(zero, var.type.shape, (0,) * var.type.ndim)

    def set_outputs(self, outputs: Iterable[Var], names: Iterable[str]) -> None:
        self.outputs, self.output_names = list(outputs), list(names)

    # -- queries --------------------------------------------------------------------
    def producers(self) -> dict[Var, Node]:
        return {v: n for n in self.nodes for v in n.outputs}

    def users(self) -> dict[Var, list[Node]]:
        out: dict[Var, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                out.setdefault(v, []).append(n)
        return out

    def prune(self) -> "Graph":
        """Drop nodes and constants that no output depends on (in place; returns self)."""
        live = set(self.outputs)
        kept = []
        for node in reversed(self.nodes):
            if any(v in live for v in node.outputs):
                kept.append(node)
                live.update(node.inputs)
        self.nodes = kept[::-1]
        self.consts = {v: a for v, a in self.consts.items() if v in live}
        return self

    def with_outputs(self, outputs: Iterable[Var], names: Iterable[str]) -> "Graph":
        """A pruned copy of this graph computing `outputs` (nodes and vars are shared)."""
        g = Graph(list(self.inputs), dict(self.consts), list(self.nodes), [], list(self.input_names))
        g.set_outputs(outputs, names)
        return g.prune()

    def rewrite(self, rule) -> "Graph":
        """A new graph where each node is replaced by `rule(node, inputs, new, remap)`: the
        output vars it added to `new`, or None to copy the node. `inputs` are already
        remapped; `remap` maps old vars to new ones. Unused nodes are pruned."""
        new = Graph(list(self.inputs), dict(self.consts), [], [], list(self.input_names))
        remap: dict[Var, Var] = {}
        for node in self.nodes:
            ins = [remap.get(v, v) for v in node.inputs]
            outs = rule(node, ins, new, remap)
            if outs is None:
                kept = [v.type for v in node.outputs] if node.op.value_shaped else None
                outs = new.add_node(node.op, ins, node.kwargs, node.outputs[0].name_hint,
                                    out_types=kept)
            remap.update(zip(node.outputs, outs))
        new.set_outputs([remap.get(v, v) for v in self.outputs], self.output_names)
        return new.prune()

    def without_shape_inputs(self) -> "Graph":
        """The same computation with static shapes only: nodes drop their run-time shape
        and bound inputs (OpDef.shape_input, OpDef.int_inputs; the params already state
        them for these input types) and the shape arithmetic that fed them is pruned;
        every other Var is kept. What TVM compiles."""
        nodes = []
        for n in self.nodes:
            static = len(n.inputs) - n.op.run_time_inputs(len(n.inputs), n.kwargs)
            nodes.append(Node(n.op, n.inputs[:static], n.params, n.outputs)
                         if static < len(n.inputs) else n)
        g = Graph(list(self.inputs), dict(self.consts), nodes, [], list(self.input_names))
        g.set_outputs(self.outputs, self.output_names)
        return g.prune()

    def verify(self) -> None:
        """Re-check SSA form, topological order and every node's shape rule."""
        defined = set(self.inputs) | set(self.consts)
        for node in self.nodes:
            for v in node.inputs:
                if v not in defined:
                    raise ShapeError(f"verify: {node} uses a value defined later or nowhere")
            expected = node.op.infer_types([v.type for v in node.inputs], node.kwargs)
            if node.op.value_shaped:      # recorded shapes, within the rule's bounds
                expected = tuple(v.type if _within(v.type, t) else t
                                 for v, t in zip(node.outputs, expected))
            if tuple(expected) != tuple(v.type for v in node.outputs):
                raise ShapeError(f"verify: {node} has types {[str(v.type) for v in node.outputs]}"
                                 f", its rule gives {[str(t) for t in expected]}")
            defined.update(node.outputs)
        missing = [v for v in self.outputs if v not in defined]
        if missing:
            raise ShapeError(f"verify: graph outputs {missing} are not defined")

    def names(self) -> dict[Var, str]:
        """Printable unique names: inputs by name, constants %c<i>, node values %<i>."""
        names: dict[Var, str] = {v: f"%{n}" for v, n in zip(self.inputs, self.input_names)}
        for i, v in enumerate(self.consts):
            names[v] = f"%c{i}"
        i = 0
        for node in self.nodes:
            for v in node.outputs:
                names[v] = f"%{i}"
                i += 1
        return names

    def __str__(self) -> str:
        nm = self.names()
        head = ", ".join(f"{nm[v]}: {v.type}" for v in self.inputs)
        lines = [f"graph({head}) {{"]
        for v, a in self.consts.items():
            hint = f"  # {v.name_hint}" if v.name_hint else ""
            lines.append(f"  {nm[v]} = const {v.type}{hint}")
        for node in self.nodes:
            outs = ", ".join(f"{nm[v]}: {v.type}" for v in node.outputs)
            args = ", ".join(nm[v] for v in node.inputs)
            ps = "".join(f", {k}={v!r}" for k, v in node.params)
            lines.append(f"  {outs} = {node.op.name}({args}{ps})")
        rets = ", ".join(f"{nm[v]} as {n!r}" for v, n in zip(self.outputs, self.output_names))
        lines.append(f"  return {rets}")
        lines.append("}")
        return "\n".join(lines)

    # -- display (REPL and Jupyter; never the weights) -----------------------------------
    def __repr__(self) -> str:
        return _view.summary(self)

    # Jupyter shows HTML before SVG, so the HTML table appears only when no drawing can.
    def _repr_svg_(self) -> str | None:
        return _view.to_svg(self)

    def _repr_html_(self) -> str | None:
        return None if _view.can_draw(self) else _view.to_html_table(self)


def _within(got: TensorType, bound: TensorType) -> bool:
    """Whether `got` fits the largest shape `bound` a value_shaped op's rule gives."""
    return got.dtype == bound.dtype and got.ndim == bound.ndim and \
        all(g <= b for g, b in zip(got.shape, bound.shape))
