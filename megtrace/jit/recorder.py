"""`TraceRecorder`: receives every op applied while a traced function runs the first
time, and builds the Graph and the tape (MegEngine's TracingTransformation)."""
from __future__ import annotations

import weakref
from contextlib import contextmanager

import numpy as np

from ..errors import TraceError
from ..interpreter import evaluate
from ..ir import Graph, TensorType, Var
from ..ops import OpDef, get
from ..random.stream import OprKeys
from ..symbolic import ARITHMETIC, SymInt, SymShape, dims_of, elems_of, leaves, plain
from ..symbolic import key as expression_key
from ..tensor import Tensor
from .entry import Source, TapeItem, weak
from .location import user_location


class TraceRecorder:
    names_values = True       # module scopes name the graph's values and ops

    def __init__(self, *, symbolic: bool, capture_as_const: bool, symbolic_shape: bool = True):
        self.graph = Graph()
        self.symbolic = symbolic
        self.symbolic_shape = symbolic_shape
        self._dims: dict[Var, SymShape] = {}                # shapes handed out as SymInts
        self._shape_vars: dict[Var, Var] = {}               # shape_of node per value
        self._int_vars: dict[int, tuple[SymInt, Var]] = {}  # SymInt id -> its 0-d value
        self._shape_derived: set[Var] = set()               # int values of shape arithmetic
        self.shape_tensors: dict[tuple, Var] = {}           # tensor(x.shape) by expression
        self.used_shape_values: dict[Var, np.ndarray] = {}  # such values used as shapes
        self.capture_as_const = capture_as_const
        self.tape: list[TapeItem] = []
        self.sources: dict[Var, Source] = {}
        self.externals: list[Var] = []
        self.value_required: set[Var] = set()
        self.value_reads: list[tuple[int, str]] = []    # (ops before, file:line): hints.py
        self.read_args: set[Var] = set()                 # arguments whose value Python read
        self._values: dict[Var, np.ndarray] = {}        # known values (args, eager results)
        self._vars: dict[int, Var] = {}
        self._keep: list[Tensor] = []                    # keeps ids in _vars valid
        self._created: set[int] = set()
        self._names: dict[int, str] = {}
        self._scopes: list[str] = []
        self._live: weakref.WeakSet[Tensor] = weakref.WeakSet()   # traced tensors alive
        self.assigned: dict[int, Tensor] = {}    # outside tensors given a traced value
        self.escaped: dict[int, weakref.ref] = {}   # gradients left in .grad (escape)
        self.undumpable: list[str] = []          # why `dump` must refuse (note_undumpable)
        self._fed_created: set[int] = set()      # created inside, fed anew on every call

    def _traced(self, var: Var) -> Tensor:
        t = Tensor._wrap(None, var, self)
        self._live.add(t)
        return t

    def materialize_live(self) -> None:
        """Entering exclude_from_trace: every traced tensor still alive becomes a plain
        tensor holding its value (MegEngine resets them the same way), so that code in
        the excluded region runs eagerly on them; used later they are outside values."""
        for t in list(self._live):
            value = self.read_value(t)
            t._value, t._var, t._owner = np.array(value), None, None
        self._live.clear()

    def alive_results(self, returned: list[Tensor]) -> list[Tensor]:
        """Values computed inside the function that are still referenced at its end besides
        the returned ones (a module attribute an EMA rebinds, a list of features a hook
        fills): MegEngine keeps them readable, so the compiled graph keeps them too and
        they hold values after the call."""
        skip = {id(t) for t in returned}
        alive = [t for t in list(self._live) if t._owner is self and id(t) not in skip
                 and t._var not in self.sources and t._var not in self.graph.consts]
        self.value_required.update(t._var for t in alive)
        return alive

    # -- values from outside ------------------------------------------------------------
    def bind_input(self, value: Tensor, name: str) -> Tensor:
        """A fresh traced tensor standing for argument `value`."""
        var = self.graph.add_input(TensorType(value.shape, value.dtype), name)
        self.sources[var] = Source("arg")
        self._values[var] = value.numpy()
        return self._traced(var)

    def created(self, t: Tensor) -> None:
        """Tensors created inside the trace are constants of the graph (MegEngine: Const)."""
        self._created.add(id(t))
        self._keep.append(t)

    def rebind(self, t: Tensor, value: Tensor) -> None:
        """`t` takes the untraced `value` (x[...] = array): from now on it is a constant
        of the graph holding that value, not what it stood for before."""
        self._vars.pop(id(t), None)
        self.created(t)

    def created_input(self, t: Tensor) -> None:
        """`t` (created inside the function) is a graph input fed on every call, unless
        capture_as_const freezes it (dispatch.trace_input)."""
        if not self.capture_as_const:
            self._fed_created.add(id(t))
            self._keep.append(t)

    def assign(self, t: Tensor) -> None:
        """Outside tensor `t` is about to hold a traced value (param -= lr * grad): when
        the function returns it gets that value, and every replay assigns it again."""
        if id(t) not in self._created:
            self.assigned[id(t)] = t

    def escape(self, t: Tensor) -> None:
        """Traced tensor `t` (a gradient left in `.grad`) gets its value when the function
        returns if anything still holds it then: held weakly, so a gradient the optimizer's
        clear_grad() dropped inside the function is not an output of the graph."""
        self.escaped[id(t)] = weakref.ref(t)

    def take_assignments(self) -> list[tuple[Tensor, Var]]:
        """The outside tensors still holding a traced value, with that value's Var."""
        held = [t for t in (r() for r in self.escaped.values()) if t is not None]
        return [(t, t._var) for t in (*self.assigned.values(), *held) if t._owner is self]

    def var_of(self, t: Tensor) -> Var:
        if t._owner is self:
            return t._var
        if t._var is not None:
            raise TraceError("trace error because a tensor of another trace was used here")
        var = self._vars.get(id(t))
        if var is not None:
            return var
        name = self._names.get(id(t)) or t.name or ""
        if id(t) in self._fed_created:
            var = self.graph.add_input(TensorType(t.shape, t.dtype),
                                       name or f"fed_{len(self.externals)}")
            self.sources[var] = Source("fed", weak(t), t._version)
            self.externals.append(var)
            self._values[var] = t.numpy()
        elif id(t) in self._created:
            var = self.graph.add_const(t.numpy(), name)
            self.sources[var] = Source("const")
        elif self.capture_as_const:
            var = self.graph.add_const(t.numpy(), name)
            self.sources[var] = Source("captured", weak(t), t._version)
        else:
            var = self.graph.add_input(TensorType(t.shape, t.dtype),
                                       name or f"external_{len(self.externals)}")
            self.sources[var] = Source("external", weak(t), t._version)
            self.externals.append(var)
            self._values[var] = t.numpy()
        self._vars[id(t)] = var
        self._keep.append(t)
        return var

    def random_key(self, seed: int, kind: str, device) -> Tensor:
        """The key of a random op being traced: an input of the graph (not a constant),
        fed by the op's own generator (OprKeys) on every run of the compiled graph; the
        tracing call draws that generator's first numbers without advancing it, as
        MegEngine's tracing run and first compiled run both do."""
        keys = OprKeys(seed, kind)
        key = Tensor._wrap(keys.first(), device=device)
        var = self.graph.add_input(TensorType(key.shape, key.dtype),
                                   f"rng_key_{len(self.externals)}")
        self.sources[var] = Source("rng", stream=keys, value=key.numpy())
        self.externals.append(var)
        self._values[var] = key.numpy()
        self._vars[id(key)] = var
        self._keep.append(key)
        return key

    # -- ops ----------------------------------------------------------------------------
    def record(self, op: OpDef, inputs: tuple[Tensor, ...], params: dict) -> tuple[Tensor, ...]:
        in_vars = [self.var_of(t) for t in inputs]
        hint = ".".join(self._scopes[1:] + [op.name])
        node_inputs = list(in_vars)
        shape = params.get(op.shape_param) if op.shape_input else None
        if shape is not None and any(self._ours(d) for d in shape):
            node_inputs.append(self._shape_value(shape))
        elif op.int_inputs is not None:
            ints = op.int_inputs({**op.params, **params})
            if any(self._ours(v) for v in ints):       # x[:x.shape[0] - 1]
                node_inputs += [self._int_value(v) for v in ints]
        params = plain(params)
        values = out_types = None
        if op.value_shaped:     # its shapes depend on the values: compute them now
            values = op.run_eager([self._value_of(v) for v in node_inputs],
                                  dict(op.bind(params)))
            out_types = [TensorType.of(np.asarray(v)) for v in values]
        _refuse_complex(op, in_vars)
        outs = self.graph.add_node(op, node_inputs, params, hint, out_types=out_types)
        _refuse_complex(op, outs)
        consts = self.graph.consts
        if any(v in self._shape_derived for v in in_vars) and \
                all(v in self._shape_derived or v in consts for v in in_vars):
            self._shape_derived.update(outs)     # x_shape[:-1], concat([x_shape, ...])
        self.tape.append(TapeItem(op, op.bind(params), tuple(in_vars), outs, user_location(),
                                  params))
        if values is not None:
            self._values.update((v, a) for v, a in zip(outs, values) if v not in consts)
        elif not self.symbolic and not all(v in consts for v in outs):
            values = op.run_eager([self._value_of(v) for v in node_inputs],
                                  dict(op.bind(params)))
            self._values.update(zip(outs, values))
        # Values stay in the recorder, so that reading one from Python is noticed.
        return tuple(self._traced(var) for var in outs)

    # -- symbolic shapes (megtrace/symbolic.py) -----------------------------------------
    def traced_shape(self, var: Var) -> tuple[int, ...]:
        """`Tensor.shape` of a traced value: SymInts that know they are var's dims."""
        if not self.symbolic_shape or var in self.graph.consts:
            return var.type.shape
        dims = self._dims.get(var)
        if dims is None:
            dims = self._dims[var] = dims_of(var)
        return dims

    def _ours(self, value) -> bool:
        return isinstance(value, SymInt) and all(
            leaf[1] in (self._dims if leaf[0] == "dim" else self._shape_derived)
            for leaf in leaves(value))

    def shape_tensor(self, data) -> Var | None:
        """`tensor(x.shape)`: the traced int32 value of the shape's expression (None when
        `data` holds none of this trace's dims)."""
        if not self.symbolic_shape or not any(self._ours(d) for d in data):
            return None
        var = self._shape_value(data)
        self.shape_tensors[tuple(expression_key(d) for d in data)] = var
        self._shape_derived.add(var)
        return var

    def shape_values(self, t: Tensor) -> SymShape | None:
        """A traced int vector used as a shape: its elements as SymInts, when it is shape
        arithmetic (its value then depends on the input shapes only)."""
        var = t._var
        if var not in self._shape_derived or var.type.ndim != 1:
            return None
        value = self._value_of(var)
        self.used_shape_values[var] = value
        return elems_of(var, value)

    def _shape_value(self, shape) -> Var:
        """The int32 vector computing `shape` at run time (its SymInts as expressions)."""
        whole = _whole_vector(shape)
        if whole is not None and whole in self._shape_derived and whole.type.dtype == "int32":
            return whole
        of = _whole_shape_of(shape)
        if of is not None and of in self._dims:      # x.shape itself: one GetVarShape
            return self._shape_of(of)
        parts = [self._int_value(d) for d in shape]
        return self.graph.add_node(get("make_shape"), parts, {}, "shape")[0]

    def _int_value(self, d) -> Var:
        """A 0-d int32 value: d's expression when it is ours, else the constant."""
        if not self._ours(d):
            return self.graph.add_const(np.array(int(d), np.int32))
        known = self._int_vars.get(id(d))
        if known is not None:
            return known[1]
        expr, g = d.expr, self.graph
        if expr[0] == "elem":
            index = ((0, None, None, None, expr[2]),)
            (out,) = g.add_node(get("subtensor"), [expr[1]], {"index": index}, "dim")
            if out.type.dtype != "int32":
                (out,) = g.add_node(get("astype"), [out], {"dtype": "int32"}, "dim")
        elif expr[0] == "dim":
            index = ((0, None, None, None, expr[2]),)
            (out,) = g.add_node(get("subtensor"), [self._shape_of(expr[1])],
                                {"index": index}, "dim")
        elif expr[0] == "neg":
            (out,) = g.add_node(get("neg"), [self._int_value(expr[1])], {}, "dim")
        else:
            operands = [self._int_value(a) for a in expr[1:]]
            (out,) = g.add_node(get(ARITHMETIC[expr[0]][1]), operands, {}, "dim")
        self._int_vars[id(d)] = (d, out)      # keeps d alive, so its id stays unique
        return out

    def _shape_of(self, var: Var) -> Var:
        """The shape_of node of `var` (one per value)."""
        if var not in self._shape_vars:
            self._shape_vars[var] = self.graph.add_node(get("shape_of"), [var], {},
                                                        "shape_of")[0]
        return self._shape_vars[var]

    def _value_of(self, var: Var) -> np.ndarray:
        if var in self.graph.consts:
            return self.graph.consts[var]
        if var not in self._values:
            self._values.update(evaluate(self.graph, self._values, [var]))
        return self._values[var]

    def read_value(self, t: Tensor) -> np.ndarray:
        """Python read a traced value: remember it, so that replays can provide it too.
        (In symbolic mode the value is computed now by the NumPy interpreter.)"""
        if t._var not in self.graph.consts:
            self.value_required.add(t._var)
            self.value_reads.append((len(self.tape), user_location()))
        source = self.sources.get(t._var)
        if source is not None and source.kind == "arg":
            self.read_args.add(t._var)
        return self._value_of(t._var)

    def output_values(self, vars_: list[Var]) -> list[np.ndarray]:
        return [self._value_of(v) for v in vars_]

    @contextmanager
    def scope(self, name: str, tensors: dict[str, Tensor]):
        """Name a module's tensors "<scope>.<attr>" and its ops "<scope>.<op>"."""
        self._scopes.append(name)
        prefix = ".".join(self._scopes[1:])   # the top-level module has no name in MegEngine
        for attr, t in tensors.items():
            self._names.setdefault(id(t), f"{prefix}.{attr}" if prefix else attr)
        try:
            yield
        finally:
            self._scopes.pop()


def _refuse_complex(op: OpDef, vars_) -> None:
    """complex64 exists in eager mode only: TVM has no complex dtype and MegEngine's
    graph files hold no complex oprs."""
    if any(v.type.dtype == "complex64" for v in vars_):
        raise TraceError.with_detail(
            "complex tensors cannot be traced",
            f"{op.name} takes or gives a complex64 value; TVM has no complex dtype and a "
            "dumped MegEngine graph cannot hold one. Compute complex values outside the "
            "traced function (or inside megtrace.jit.exclude_from_trace)")


def _whole_vector(shape) -> Var | None:
    """The vector whose elements, all of them in order, `shape` is (else None)."""
    exprs = [d.expr if isinstance(d, SymInt) else None for d in shape]
    if not exprs or any(e is None or e[0] != "elem" for e in exprs):
        return None
    var = exprs[0][1]
    ok = var.type.shape == (len(exprs),) and all(e[1] is var and e[2] == i
                                                  for i, e in enumerate(exprs))
    return var if ok else None


def _whole_shape_of(shape) -> Var | None:
    """The value whose dims, all of them in order, `shape` is (else None)."""
    exprs = [d.expr if isinstance(d, SymInt) else None for d in shape]
    if not exprs or any(e is None or e[0] != "dim" for e in exprs):
        return None
    var = exprs[0][1]
    ok = var.type.ndim == len(exprs) and all(e[1] is var and e[2] == i
                                               for i, e in enumerate(exprs))
    return var if ok else None
