"""Shapes read while tracing stay symbolic: `x.shape[0]` is a TracedDim (an int that
remembers it is dimension 0 of x), and where one reaches a recorded call (reshape, zeros,
a slice) the graph computes it from x at run time, so a TracedModule runs at any batch
size, as MegEngine's symbolic-shape tracing does. The graph computes dims with `dim` and
`dim_arith`, which under jit.trace give its symbolic dims in turn."""
from __future__ import annotations

import operator

_ARITH = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
          "floordiv": operator.floordiv, "mod": operator.mod}


def dim(x, axis: int) -> int:
    """Dimension `axis` of tensor x."""
    return x.shape[axis]


def dim_arith(op: str, a, b) -> int:
    """Integer arithmetic on dims (add, sub, mul, floordiv, mod)."""
    return _ARITH[op](a, b)


class TracedDim(int):
    """An int with the expression that computes it: ("dim", tensor, axis) or
    (op, a, b) with a/b TracedDims or ints."""

    def __new__(cls, value: int, expr: tuple):
        self = super().__new__(cls, value)
        self.expr = expr
        return self

    def _binary(self, other, op: str, reflected: bool = False):
        if not isinstance(other, int) or isinstance(other, bool):
            fn = getattr(int, f"__{'r' if reflected else ''}{op}__")
            return fn(int(self), other)
        a, b = (other, self) if reflected else (self, other)
        return TracedDim(_ARITH[op](int(a), int(b)), (op, a, b))

    def __add__(self, other):
        return self._binary(other, "add")

    def __radd__(self, other):
        return self._binary(other, "add", True)

    def __sub__(self, other):
        return self._binary(other, "sub")

    def __rsub__(self, other):
        return self._binary(other, "sub", True)

    def __mul__(self, other):
        return self._binary(other, "mul")

    def __rmul__(self, other):
        return self._binary(other, "mul", True)

    def __floordiv__(self, other):
        return self._binary(other, "floordiv")

    def __rfloordiv__(self, other):
        return self._binary(other, "floordiv", True)

    def __mod__(self, other):
        return self._binary(other, "mod")

    def __rmod__(self, other):
        return self._binary(other, "mod", True)

    def __neg__(self):
        return TracedDim(-int(self), ("mul", self, -1))

    def __pos__(self):
        return self

    def __reduce__(self):          # copied or pickled, a dim is its value
        return int, (int(self),)
