"""`Replayer`: later calls re-run the Python function and check every op against the
tape (MegEngine's CompiledTransformation). Values come from the compiled graph, run
once per call the first time a value is needed."""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from ..errors import TraceError
from ..ir import Var
from ..ops import OpDef
from ..symbolic import dims_of
from ..tensor import Tensor
from .entry import TraceEntry


def _error(reason: str) -> TraceError:
    return TraceError(f"trace error because {reason}")


class Replayer:
    def __init__(self, entry: TraceEntry, run_compiled, args: dict[Var, np.ndarray]):
        self.entry = entry
        self.pc = 0
        self._run_compiled = run_compiled     # (entry, feeds) -> {var: value}
        self._args = args
        self._externals: dict[Var, Tensor] = {}
        self._created: set[int] = set()
        self._keep: list[Tensor] = []
        self._results: dict[Var, np.ndarray] | None = None

    # -- the Recorder protocol ----------------------------------------------------------
    def bind_input(self, var: Var) -> Tensor:
        return Tensor._wrap(None, var, self)

    def scope(self, name: str, tensors: dict):
        return nullcontext()

    def traced_shape(self, var: Var) -> tuple[int, ...]:
        """SymInts as while tracing, so that the function takes the same path (F.zeros of
        a traced shape is an op, not a constant); their expressions are already in the
        graph."""
        if not self.entry.symbolic_shape or self.entry.const_value(var) is not None:
            return var.type.shape
        return dims_of(var)

    def created(self, t: Tensor) -> None:
        self._created.add(id(t))
        self._keep.append(t)

    def record(self, op: OpDef, inputs: tuple[Tensor, ...], params: dict) -> tuple[Tensor, ...]:
        tape = self.entry.tape
        if self.pc >= len(tape):
            raise _error(f"too many instructions: {op.name} was not traced here")
        item = tape[self.pc]
        self.pc += 1
        if op is not item.op:
            raise _error(f"operator mismatch: traced {item.op.name}, now {op.name} "
                         f"(op #{self.pc})")
        if op.bind(params) != item.params:
            raise _error(f"operator mismatch: {op.name} parameters changed from "
                         f"{dict(item.params)} to {dict(op.bind(params))}")
        if len(inputs) != len(item.inputs):
            raise _error(f"input size mismatch: {op.name} traced with {len(item.inputs)} "
                         f"inputs, now {len(inputs)}")
        for t, var in zip(inputs, item.inputs):
            self._check_input(op, t, var)
        return tuple(Tensor._wrap(None, v, self) for v in item.outputs)

    def _check_input(self, op: OpDef, t: Tensor, var: Var) -> None:
        if t._owner is self:
            if t._var is not var:
                raise _error(f"input id mismatch: {op.name} reads a different value than "
                             "when it was traced")
            return
        source = self.entry.sources.get(var)
        if source is None:
            raise _error(f"expect internal node, got external: {op.name} was traced on a "
                         "value computed inside the function")
        if t.dtype.name != var.type.dtype:
            raise _error(f"dtype mismatch: {var.type.dtype} vs {t.dtype.name}")
        if source.kind == "external":
            if t.shape != var.type.shape:
                raise _error(f"shape mismatch: external {var.name_hint} traced as "
                             f"{var.type.shape}, now {t.shape}")
            self._externals[var] = t
        elif source.kind in ("const", "captured"):
            same = source.kind == "captured" and source.outside() is t and \
                t._version == source.version
            if not same and not np.array_equal(t.numpy(), self.entry.const_value(var)):
                raise _error("tensors not equals: "
                             f"{var.name_hint or 'a constant'} changed since it was traced")
        else:
            raise _error("expect internal node, got external")

    def read_value(self, t: Tensor) -> np.ndarray:
        var = t._var
        const = self.entry.const_value(var)
        if const is not None:
            return const
        if var in self._args:
            return self._args[var]
        if var not in self.entry.exec_outputs:
            raise _error("value unreadable: this value was not read from Python while "
                         "tracing, so the compiled graph does not keep it")
        return self.results()[var]

    # -- running ------------------------------------------------------------------------
    def results(self) -> dict[Var, np.ndarray]:
        if self._results is None:
            feeds = dict(self._args)
            for var in self.entry.externals:
                t = self._externals.get(var)
                t = t if t is not None else self.entry.sources[var].outside()
                if t is None:
                    raise _error(f"external {var.name_hint} no longer exists")
                feeds[var] = t.numpy()
            self._results = self._run_compiled(self.entry, feeds)
        return self._results

    def finish(self, leaves: list[Tensor]) -> list[np.ndarray]:
        if self.pc != len(self.entry.tape):
            raise _error(f"mismature end: {len(self.entry.tape) - self.pc} traced ops were "
                         "not run")
        if len(leaves) != len(self.entry.out_vars):
            raise _error(f"outputs size mismatch: traced {len(self.entry.out_vars)}, now "
                         f"{len(leaves)}")
        for t, var in zip(leaves, self.entry.out_vars):
            if t._owner is not self or t._var is not var:
                if not (var in self.entry.sources and t._var is None):
                    raise _error("inputs output mismatch: a returned tensor is not the one "
                                 "traced")
        values = []
        for var in self.entry.out_vars:
            const = self.entry.const_value(var)
            values.append(const if const is not None else
                          self._args[var] if var in self._args else self.results()[var])
        return values
