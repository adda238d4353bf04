"""Elementwise epilogues: the ops that follow a conv or dense and run on its register tile.

Writing bias + batch norm + ReLU (+ a residual add) into the kernel's write-back saves a
full pass over the activation per op. An epilogue is a list of `Step`s; each applies one
of megtrace's elementwise ops to the running value and, for binary ops, an `Operand`:
a scalar, a per-channel vector (a constant), or a runtime tensor with the output's shape.
The kernel that owns the epilogue says how to read each operand at an output index.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .._tvm import tvm
from . import fast_math

BINARY_OPS = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")


def _f(value: float):
    return tvm().tirx.const(value, "float32")


def _relu6(x):
    t = tvm().tirx
    return t.min(t.max(x, _f(0.0)), _f(6.0))


# megtrace's unary elementwise ops as TIR, written as their Relax lowering computes them.
_UNARY = {
    "relu": lambda x: tvm().tirx.max(x, _f(0.0)),
    "neg": lambda x: -x,
    "square": lambda x: x * x,
    "relu6": _relu6,
    "hswish": lambda x: x * _relu6(x + _f(3.0)) / _f(6.0),
    "hsigmoid": lambda x: _relu6(x + _f(3.0)) / _f(6.0),
    "silu": lambda x: x * fast_math.unary("sigmoid")(x),
    # exp/erf/tanh/sigmoid as vectorizable polynomials unless MEGTRACE_FAST_MATH=0
    **{name: (lambda n: lambda x: fast_math.unary(n)(x))(name)
       for name in ("gelu", "sigmoid", "tanh", "exp")},
    **{name: (lambda n: lambda x: getattr(tvm().tirx, n)(x))(name)
       for name in ("log", "abs", "floor", "ceil", "sin", "cos", "sqrt")},
}
UNARY_OPS = tuple(_UNARY)


def unary(op: str, x):
    return _UNARY[op](x)


def binary(op: str, a, b):
    t = tvm().tirx
    if op == "leaky_relu":          # b is the slope
        return t.Select(a > _f(0.0), a, a * b)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "div": lambda: a / b, "maximum": lambda: t.max(a, b),
            "minimum": lambda: t.min(a, b), "pow": lambda: t.power(a, b)}[op]()


@dataclass(frozen=True, eq=False)
class Operand:
    """The second argument of a binary step.

    kind "scalar": `scalar` holds the value; "vector": `array` holds one float32 per
    output channel; "tensor": `var` is a megtrace Var with the output's type.
    """

    kind: str
    scalar: float = 0.0
    array: np.ndarray | None = None
    var: Any = None


@dataclass(frozen=True, eq=False)
class Step:
    op: str
    operand: Operand | None = None
    value_on_left: bool = True       # op(value, operand) rather than op(operand, value)


@dataclass(eq=False)
class Epilogue:
    steps: list[Step] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.steps)

    def vectors(self) -> list[np.ndarray]:
        return [s.operand.array for s in self.steps if s.operand and s.operand.kind == "vector"]

    def tensors(self) -> list[Any]:
        return [s.operand.var for s in self.steps if s.operand and s.operand.kind == "tensor"]

    def placeholders(self, vector_shape, tensor_shape) -> tuple[list, list]:
        """TE placeholders for the vector operands (v0, v1, ...) and tensor operands
        (t0, t1, ...) a kernel with this epilogue takes as extra arguments."""
        te = tvm().te
        vectors = [te.placeholder(vector_shape, "float32", name=f"v{i}")
                   for i in range(len(self.vectors()))]
        tensors = [te.placeholder(tensor_shape, "float32", name=f"t{i}")
                   for i in range(len(self.tensors()))]
        return vectors, tensors

    def apply(self, value, vector_at: Callable[[int], Any], tensor_at: Callable[[int], Any]):
        """The epilogue of `value` (a PrimExpr); `vector_at(i)` / `tensor_at(i)` read the
        i-th vector / tensor operand at the current output index."""
        t = tvm().tirx
        nv = nt = 0
        for step in self.steps:
            if step.operand is None:
                value = unary(step.op, value)
                continue
            o = step.operand
            if o.kind == "scalar":
                other = t.const(float(np.float32(o.scalar)), "float32")
            elif o.kind == "vector":
                other, nv = vector_at(nv), nv + 1
            else:
                other, nt = tensor_at(nt), nt + 1
            value = binary(step.op, value, other) if step.value_on_left else \
                binary(step.op, other, value)
        return value


def channel_operand(array: np.ndarray, out_shape: Sequence[int], axis: int) -> Operand | None:
    """A constant as an Operand if it only varies along `axis` of the output (a bias, a
    scale), or is a single value; None if it varies elsewhere or widens the output."""
    array = np.asarray(array)
    if array.dtype != np.float32 or array.ndim > len(out_shape):
        return None
    if array.size == 1:
        return Operand("scalar", scalar=float(array.reshape(())))
    shape = (1,) * (len(out_shape) - array.ndim) + array.shape
    axis = axis % len(out_shape)
    for i, (d, o) in enumerate(zip(shape, out_shape)):
        if d != 1 and (i != axis or d != o):
            return None
    return Operand("vector", array=np.ascontiguousarray(array.reshape(-1), np.float32))


def blocked_output(full, out_shape: Sequence[int], channels: int, epilogue: Epilogue,
                   vectors: Sequence[Any], tensors: Sequence[Any], name: str = "out"):
    """The blocked (N, C/16, H, W, 16) result: `full` (which may be wider than the output,
    see the kernels' width padding) through `epilogue`, with padded channels forced to 0
    so that the zero-padding invariant of the layout holds whatever the epilogue does.
    `vectors` are (C/16, 16) and `tensors` blocked te.Tensors of the output's shape."""
    te, t = tvm().te, tvm().tirx

    def f(i, c, y, x, ci):
        value = epilogue.apply(full[i, c, y, x, ci], lambda k: vectors[k][c, ci],
                               lambda k: tensors[k][i, c, y, x, ci])
        if channels % 16:
            value = te.if_then_else(c * 16 + ci < channels, value, t.const(0.0, "float32"))
        return value
    return te.compute(tuple(out_shape), f, name=name)
