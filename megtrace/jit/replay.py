"""`Replayer`: later calls re-run the Python function and check every op against the
tape (MegEngine's CompiledTransformation). Values come from the compiled graph, run
once per call the first time a value is needed.

The checks and their messages are MegEngine's (trace.cpp): a traced input that was
computed inside the function is "internal", anything else (arguments, outside tensors,
constants) is "external"; each tape input must be given the same kind of value again.
`str(error)` is MegEngine's message; the op, and the user's lines that traced and
replayed it, are the error's detail.
"""
from __future__ import annotations

import weakref
from concurrent.futures import Future

import numpy as np

from ..errors import TraceError
from ..interpreter import evaluate
from ..ir import Var
from ..ops import OpDef
from ..symbolic import dims_of, elems_of, key
from ..device import as_device
from ..tensor import Tensor
from .entry import FEED as _FEED, TapeItem, TraceEntry, materialize
from .hints import branch_hint, constant_hint
from .location import user_location


class Replayer:
    names_values = False      # names come from the tape: Module skips scope()

    def __init__(self, entry: TraceEntry, run_compiled, args: dict[Var, np.ndarray]):
        self.entry = entry
        self.pc = 0
        self._tape = entry.tape
        self._checks = entry.replay_checks()
        self._dims = entry.dims
        self._device = as_device(None)
        self._run_compiled = run_compiled     # (entry, feeds) -> {var: value}
        self._args = args
        # the values the compiled graph returns (a set: finish asks for every assigned
        # parameter, momentum buffer and running statistic)
        self._kept = set(entry.exec_outputs)
        self._fed: dict[Var, np.ndarray] = {}  # external inputs: values given this call
        self._rng_vars = [v for v in entry.externals if entry.sources[v].kind == "rng"]
        self._rng_drawn = 0
        self._assigned: dict[int, Tensor] = {}  # outside tensors given a traced value
        self._escaped: list[weakref.ref] = []   # gradients left in .grad (escape)
        self._created: set[int] = set()
        self._keep: list[Tensor] = []
        self._results: dict[Var, np.ndarray] | None = None
        # the compiled run already started with `args` (overlap.py), when it could be
        self.pending: Future | None = None
        # Weak references to the traced tensors handed out (a plain list: a WeakSet's
        # add costs more than the rest of a replayed op); exclude_from_trace reads them.
        self._live: list[weakref.ref] = []
        # calls that do more than check an op (an assignment, a value read, a random
        # draw...): a gradient rule that made one is not kept as a recipe
        self.effects = 0
        self.vjp_recipes = entry.vjp_recipes      # autodiff/recipes.py

    def created_mark(self) -> int:
        return len(self._keep)

    def created_since(self, mark: int) -> list[Tensor]:
        """Tensors made inside the function since `created_mark()` gave `mark`."""
        return self._keep[mark:]

    def _traced(self, var: Var) -> Tensor:
        t = _wrap(None, var, self, self._device)
        self._live.append(_ref(t))
        return t

    # -- the Recorder protocol ----------------------------------------------------------
    def bind_input(self, var: Var) -> Tensor:
        return self._traced(var)

    def materialize_live(self) -> None:
        """Entering exclude_from_trace (see TraceRecorder.materialize_live)."""
        self.effects += 1
        alive = {id(t): t for t in (r() for r in self._live) if t is not None}
        for t in alive.values():
            if t._owner is not self:
                continue          # materialized already (a tensor that stood in twice)
            if self._internal(t) and t._var not in self._kept \
                    and t._var not in self.entry.full_graph.consts:
                raise TraceError.because(
                    "data unreadable", "a tensor alive at the start of exclude_from_trace "
                    "was not alive there while tracing, so the compiled graph does not keep it")
            value = self.read_value(t)
            t._value, t._var, t._owner = np.array(value), None, None
        self._live.clear()

    def traced_shape(self, var: Var) -> tuple[int, ...]:
        """SymInts as while tracing, so that the function takes the same path (F.zeros of
        a traced shape is an op, not a constant); their expressions are already in the
        graph."""
        dims = self._dims.get(var)
        if dims is None:
            if not self.entry.symbolic_shape or self.entry.const_value(var) is not None:
                dims = var.type.shape
            else:
                dims = dims_of(var)
            self._dims[var] = dims
        return dims

    def shape_tensor(self, data) -> Var | None:
        """`tensor(x.shape)`: the value traced for the same expression."""
        self.effects += 1
        if not self.entry.symbolic_shape:
            return None
        return self.entry.shape_tensors.get(tuple(key(d) for d in data))

    def shape_values(self, t: Tensor):
        self.effects += 1
        value = self.entry.shape_values.get(t._var)
        return None if value is None else elems_of(t._var, value)

    def created(self, t: Tensor) -> None:
        self._created.add(id(t))
        self._keep.append(t)

    def random_key(self, seed: int, kind: str, device) -> Tensor:
        """The next key of the traced op this draw stands for (the random ops run in
        traced order; the tape check then feeds it to the graph through _check_input)."""
        self.effects += 1
        var = self._rng_vars[self._rng_drawn]
        self._rng_drawn += 1
        return Tensor._wrap(self.entry.sources[var].stream.next_key(), device=device)

    def created_input(self, t: Tensor) -> None:
        """A fed tensor (TraceRecorder.created_input): _check_input feeds its value."""
        self.effects += 1

    def assign(self, t: Tensor) -> None:
        """Outside tensor `t` takes a value of this replay: `finish` gives it the value
        (TraceRecorder.assign)."""
        self.effects += 1
        if id(t) not in self._created:
            self._assigned[id(t)] = t

    def escape(self, t: Tensor) -> None:
        """A gradient left in `.grad`, held weakly (TraceRecorder.escape)."""
        self.effects += 1
        self._escaped.append(_ref(t))

    def record(self, op: OpDef, inputs: tuple[Tensor, ...], params: dict) -> tuple[Tensor, ...]:
        """The op must be the tape's next one, on the same kinds of values. The common
        case (same op and params, inputs the values the tape names, the unchanged
        captured parameters, outside tensors fed to the graph (a parameter the last call
        updated) of the traced shape and dtype, or one-element constants of the traced
        value) is checked inline; anything else takes `_check`, which raises MegEngine's
        error or accepts the new value."""
        index = self.pc
        checks = self._checks
        if index < len(checks):
            item_op, raw_params, expected, outs = checks[index]
            fed = self._fed
            if op is item_op and params == raw_params and len(inputs) == len(expected):
                for t, (var, cap) in zip(inputs, expected):
                    owner = t._owner
                    if owner is self:
                        if t._var is var:
                            continue
                    elif cap is not None and owner is None:
                        ref, seen = cap
                        if ref is _FEED:    # fed: a parameter the last call assigned
                            value = t._value
                            if value is not None and value.shape == seen[0] and \
                                    value.dtype == seen[1]:
                                # _check_input's verdict and its feed (no overlapped
                                # run to drop: a graph with externals starts none)
                                fed[var] = value
                                continue
                        elif ref is not None:       # a captured parameter, unchanged
                            if ref() is t and t._version == seen:
                                continue
                        else:   # a one-element constant given again: _equal's verdict
                            value = t._value
                            if value is not None and value.shape == seen[0] and \
                                    value.item() == seen[1]:
                                continue
                    break
                else:
                    self.pc = index + 1
                    if len(outs) == 1:      # Tensor._wrap's fields, set here: no call
                        t = _new(Tensor)
                        t._value, t._var, t._owner, t._version = None, outs[0], self, 0
                        t._name, t._qparams, t._format, t._ad = "", None, "default", None
                        t._device = self._device
                        self._live.append(_ref(t))
                        return (t,)
                    return tuple(self._traced(v) for v in outs)
        return self._check(op, inputs, params)

    def _check(self, op: OpDef, inputs: tuple[Tensor, ...], params: dict
               ) -> tuple[Tensor, ...]:
        tape = self._tape
        if self.pc >= len(tape):
            raise TraceError.because(
                "too many instructions",
                f"{op.name} at {user_location()} comes after the {len(tape)} traced ops")
        item = tape[self.pc]
        index = self.pc
        self.pc += 1

        def here() -> str:          # built only for an error: replays stay cheap per op
            return f"{item.describe(index)}, replayed at {user_location()}"
        if len(inputs) != len(item.inputs):
            raise TraceError.because(
                "input size mismatch", f"{here()}: traced with {len(item.inputs)} inputs, "
                f"now {len(inputs)}")
        if op is not item.op:
            raise TraceError.because("operator mismatch",
                                     f"operator mismatch: traced {item.op.name}, now "
                                     f"{op.name}; {here()}\n"
                                     f"{branch_hint(self.entry, index)}")
        if op.bind(params) != item.params:
            raise TraceError.because("operator mismatch",
                                     f"operator mismatch: {op.name} parameters changed from "
                                     f"{dict(item.params)} to {dict(op.bind(params))}; {here()}"
                                     f"\n{branch_hint(self.entry, index)}")
        for i, (t, var) in enumerate(zip(inputs, item.inputs)):
            self._check_input(item, t, var, lambda i=i: f"input {i} of {here()}", index)
        return tuple(self._traced(v) for v in item.outputs)

    def _internal(self, t: Tensor) -> bool:
        """Computed by a traced op during this replay (arguments are external)."""
        return t._owner is self and t._var not in self.entry.sources

    def _check_input(self, item: TapeItem, t: Tensor, var: Var, where, index: int) -> None:
        if t._owner is not None and t._owner is not self:
            raise TraceError.because("expect external node, got internal",
                                     f"{where()}: a tensor of another trace was used")
        source = self.entry.sources.get(var)
        if source is None:                       # traced: computed inside the function
            if not self._internal(t):
                raise TraceError.because(
                    "expect internal node, got external",
                    f"{where()} was traced on a value computed inside the function")
            if t._var is not var:
                raise TraceError.because(
                    "input id mismatch",
                    f"{where()} reads a different value than when it was traced")
            return
        if self._internal(t):
            raise TraceError.because(
                "expect external node, got internal",
                f"{where()} was traced on {var.name_hint or 'a value from outside'}")
        if source.kind in ("const", "captured"):
            same = source.kind == "captured" and source.outside() is t and \
                t._version == source.version
            if not same and not _equal(t.numpy(), self.entry.const_value(var)):
                raise TraceError.because(
                    "tensors not equals",
                    f"tensors not equals: {var.name_hint or 'a constant'} changed since it "
                    f"was traced; {where()}\n{constant_hint(self.entry, index, source.kind)}")
            return
        if t.dtype.name != var.type.dtype:
            raise TraceError.because(f"dtype mismatch: {var.type.dtype} vs {t.dtype.name}",
                                     where())
        if t._owner is self and t._var is var:  # the argument it was traced on
            return
        if t.shape != var.type.shape:
            raise TraceError.because(
                "shape mismatch", f"{where()}: {var.name_hint} was traced as "
                f"{var.type.shape}, now {t.shape} (the compiled graph has static shapes)")
        # its value now: a later assignment in this call must not change what was fed
        self._fed[var] = t._value if t._owner is None else t.numpy()
        if self._results is None:
            # a run started beside the replay (overlap.py) was given the arguments as
            # traced: drop it, unread, and run on what this call feeds
            self.pending = None

    def read_value(self, t: Tensor) -> np.ndarray:
        self.effects += 1
        var = t._var
        const = self.entry.const_value(var)
        if const is not None:
            return const
        if var in self._args:
            return self._args[var]
        if var not in self._kept:
            raise TraceError.because(
                "value unreadable", f"value unreadable: {var.name_hint or 'this value'} was "
                "not read from Python while tracing, so the compiled graph does not keep it")
        return self._value(var)

    # -- running ------------------------------------------------------------------------
    def _value(self, var: Var) -> np.ndarray:
        """From the compiled graph, run once per call. Before every outside value it reads
        is known (a read ahead of an exclude_from_trace region whose results the graph
        consumes later) the value comes from the NumPy interpreter on its dependencies."""
        if self._results is None:
            if self.pending is not None:
                self._results = self.pending.result()
                return self._results[var]
            feeds = self._feeds()
            if any(v is None for v in feeds.values()):
                known = {v: a for v, a in feeds.items() if a is not None}
                return evaluate(self.entry.full_graph, known, [var])[var]
            self._results = self._run_compiled(self.entry, feeds)
        return self._results[var]

    def _feeds(self) -> dict[Var, np.ndarray | None]:
        """Graph inputs: the arguments, whatever this call gave an input (MegEngine feeds
        an external var the value given there, even another argument), and outside
        tensors the replay has not reached yet as they are now."""
        feeds: dict[Var, np.ndarray | None] = dict(self._args)
        for var in self.entry.externals:
            if var in self._fed:
                continue
            source = self.entry.sources[var]
            t = source.outside() if source.kind != "fed" else None
            # None (unknown yet) for a tensor that already holds a value of this replay
            feeds[var] = None if t is None or t._owner is self else t.numpy()
        feeds.update(self._fed)
        return feeds

    def finish(self, leaves: list[Tensor]) -> list[np.ndarray]:
        """The values of the returned tensors (MegEngine: what stays alive at the end)."""
        if self.pc != len(self.entry.tape):
            rest = self.entry.tape[self.pc]
            raise TraceError.because(
                "mismature end", f"{len(self.entry.tape) - self.pc} traced ops were not run, "
                f"the first is {rest.describe(self.pc)}")
        if self._results is None and self.pending is not None:
            self._results = self.pending.result()   # its errors too, even if nothing is read
        if self._results is None:
            missing = [v.name_hint for v, a in self._feeds().items() if a is None]
            if missing:
                raise TraceError.because(f"external {missing[0]} no longer exists")
        values = []
        for t in leaves:
            if t._owner is not self:
                values.append(t.numpy())
            elif self._internal(t) and t._var not in self._kept \
                    and t._var not in self.entry.full_graph.consts:
                raise TraceError.because(
                    "data unreadable", "a returned tensor was neither returned nor read "
                    "while tracing, so the compiled graph does not keep it")
            else:
                values.append(self.read_value(t))
        compiled = self._results or {}
        held = [t for t in (r() for r in self._escaped) if t is not None]
        for t in (*self._assigned.values(), *held):
            if t._owner is self:
                materialize(t, self.read_value(t), fresh=t._var in compiled)
        # values still referenced besides the returned ones (TraceRecorder.alive_results)
        returned = {id(t) for t in leaves}
        for ref in self._live:
            t = ref()
            if t is not None and t._owner is self and t._var in compiled and \
                    id(t) not in returned:
                materialize(t, compiled[t._var], fresh=True)
        return values


_wrap = Tensor._wrap
_new = object.__new__
_ref = weakref.ref


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """MegEngine's array_comparator (all elements equal), also requiring the traced shape:
    the compiled graph holds the traced constant."""
    return np.array_equal(np.asarray(a), np.asarray(b))
