"""`TraceRecorder`: receives every op applied while a traced function runs and builds
the Graph (the TracingTransformation of MegEngine's trace)."""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import TraceError
from ..ir import Graph, TensorType, Var
from ..ops import OpDef
from ..tensor import Tensor


class TraceRecorder:
    def __init__(self, *, symbolic: bool, capture_as_const: bool):
        self.graph = Graph()
        self.symbolic = symbolic
        self.capture_as_const = capture_as_const
        self.externals: list[tuple[Var, Tensor]] = []   # non-captured outside tensors
        self._vars: dict[int, Var] = {}
        self._keep: list[Tensor] = []                    # keeps ids in _vars valid
        self._created: set[int] = set()
        self._names: dict[int, str] = {}
        self._scopes: list[str] = []

    # -- inputs -------------------------------------------------------------------------
    def bind_input(self, value: Tensor, name: str) -> Tensor:
        """A fresh traced tensor standing for argument `value`."""
        var = self.graph.add_input(TensorType(value.shape, value.dtype), name)
        return Tensor._wrap(None if self.symbolic else value.numpy(), var, self)

    def created(self, t: Tensor) -> None:
        """Tensors created inside the trace are constants of the graph (MegEngine: Const)."""
        self._created.add(id(t))
        self._keep.append(t)

    def var_of(self, t: Tensor) -> Var:
        if t._owner is self:
            return t._var
        if t._var is not None:
            raise TraceError("a tensor produced by another trace was used in this trace")
        var = self._vars.get(id(t))
        if var is not None:
            return var
        name = self._names.get(id(t)) or t.name or ""
        if id(t) in self._created or self.capture_as_const:
            var = self.graph.add_const(t.numpy(), name)
        else:
            var = self.graph.add_input(TensorType(t.shape, t.dtype),
                                       name or f"external_{len(self.externals)}")
            self.externals.append((var, t))
        self._vars[id(t)] = var
        self._keep.append(t)
        return var

    # -- ops ----------------------------------------------------------------------------
    def record(self, op: OpDef, inputs: tuple[Tensor, ...], params: dict) -> tuple[Tensor, ...]:
        in_vars = [self.var_of(t) for t in inputs]
        hint = ".".join(self._scopes[1:] + [op.name])
        outs = self.graph.add_node(op, in_vars, params, hint)
        if self.symbolic:
            values = [self.graph.consts.get(v) for v in outs]
        elif all(v in self.graph.consts for v in outs):
            values = [self.graph.consts[v] for v in outs]
        else:
            values = op.run_eager([self._value(t, v) for t, v in zip(inputs, in_vars)],
                                  dict(op.bind(params)))
        return tuple(Tensor._wrap(val, var, self) for val, var in zip(values, outs))

    def _value(self, t: Tensor, var: Var):
        if var in self.graph.consts:
            return self.graph.consts[var]
        return t._value

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
