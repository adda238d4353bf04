"""`SymInt`: a traced dimension that remembers where it came from.

Inside a trace (symbolic_shape=True, MegEngine's default) `Tensor.shape` gives SymInts:
plain ints to Python (control flow, printing, NumPy all see the traced value), which also
record the expression that computes them from the graph's values ("dim 0 of x, times
dim 1 of x"). When such a value reaches a shape argument (reshape, broadcast_to, zeros...)
the trace writes the expression into the graph as shape arithmetic, as MegEngine's
symbolic shapes do (GetVarShape -> Subtensor -> Elemwise -> Concat), so that a dumped
model runs at any batch size. Arithmetic that leaves the integers (/, **, floats) gives
plain numbers: those values are baked in.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

# expr: ("dim", var, axis) for dimension `axis` of `var`; (op, a, b) or ("neg", a) for
# arithmetic, where a and b are SymInts or plain ints.
Expr = tuple


class SymInt(int):
    """An int with an expression; arithmetic with ints records a new expression."""

    expr: Expr

    def __new__(cls, value: int, expr: Expr) -> "SymInt":
        self = super().__new__(cls, value)
        self.expr = expr
        return self

    def __neg__(self) -> "SymInt":
        return SymInt(-int(self), ("neg", self))

    def __pos__(self) -> "SymInt":
        return self

    def __reduce__(self):               # pickled or deep-copied, a SymInt is its value
        return (int, (int(self),))

    def __copy__(self) -> int:
        return int(self)

    def __deepcopy__(self, memo) -> int:
        return int(self)


# name: (Python operator, the megtrace op that computes it on int32 shape values)
ARITHMETIC: dict[str, tuple[Callable[[int, int], int], str]] = {
    "add": (operator.add, "add"), "sub": (operator.sub, "sub"),
    "mul": (operator.mul, "mul"), "floordiv": (operator.floordiv, "floor_div"),
    "mod": (operator.mod, "mod"),
}


def _method(name: str, fn: Callable[[int, int], int], reflected: bool):
    def method(self, other: Any):
        if isinstance(other, bool) or not isinstance(other, int):
            return getattr(int(self), f"__{'r' if reflected else ''}{name}__")(other)
        a, b = (other, self) if reflected else (self, other)
        return SymInt(fn(int(a), int(b)), (name, a, b))
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


for _name, (_fn, _) in ARITHMETIC.items():
    setattr(SymInt, f"__{_name}__", _method(_name, _fn, False))
    setattr(SymInt, f"__r{_name}__", _method(_name, _fn, True))


class SymShape(tuple):
    """`Tensor.shape` in a trace: a tuple of SymInts. MegEngine's is a shape Tensor there,
    so it also answers `.numpy()`."""

    def numpy(self) -> np.ndarray:
        return np.array([int(d) for d in self], np.int32)


def dims_of(var) -> SymShape:
    """The shape of IR value `var` as SymInts."""
    return SymShape(SymInt(d, ("dim", var, i)) for i, d in enumerate(var.type.shape))


def elems_of(var, values) -> SymShape:
    """The elements of int vector `var` (traced shape arithmetic) as SymInts."""
    return SymShape(SymInt(int(v), ("elem", var, i)) for i, v in enumerate(values))


def key(value: Any) -> tuple:
    """A SymInt's expression as a hashable structure (vars by identity)."""
    if not isinstance(value, SymInt):
        return ("int", int(value))
    expr = value.expr
    if expr[0] in ("dim", "elem"):
        return (expr[0], id(expr[1]), expr[2])
    return (expr[0],) + tuple(key(a) for a in expr[1:])


def leaves(value: Any):
    """The ("dim", var, axis) and ("elem", var, index) leaves a SymInt's expression reads
    (nothing for an int)."""
    if not isinstance(value, SymInt):
        return
    expr = value.expr
    if expr[0] in ("dim", "elem"):
        yield expr
        return
    for operand in expr[1:]:
        yield from leaves(operand)


def plain(value: Any) -> Any:
    """`value` with every SymInt (also inside tuples and lists) turned into an int."""
    if isinstance(value, SymInt):
        return int(value)
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def has_symbols(values) -> bool:
    return any(isinstance(v, SymInt) for v in values)
