"""Elementwise operators, declared as table rows (MegEngine's Elemwise family)."""
from __future__ import annotations

import numpy as np

from ..ir import TensorType
from ._rules import broadcast_shapes, same_dtype
from .registry import MgeOpr, OpDef, register


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


def _sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


_UNARY = [  # name,     numpy,        relax lowering,                       Elemwise mode
    ("relu",     _relu,        lambda R, x: R.nn.relu(x),             "RELU"),
    ("sigmoid",  _sigmoid,     lambda R, x: R.sigmoid(x),             "SIGMOID"),
    ("tanh",     np.tanh,      lambda R, x: R.tanh(x),                "TANH"),
    ("exp",      np.exp,       lambda R, x: R.exp(x),                 "EXP"),
    ("log",      np.log,       lambda R, x: R.log(x),                 "LOG"),
    ("neg",      np.negative,  lambda R, x: R.negative(x),            "NEGATE"),
    ("abs",      np.abs,       lambda R, x: R.abs(x),                 "ABS"),
    ("floor",    np.floor,     lambda R, x: R.floor(x),               "FLOOR"),
    ("ceil",     np.ceil,      lambda R, x: R.ceil(x),                "CEIL"),
    ("sin",      np.sin,       lambda R, x: R.sin(x),                 "SIN"),
    ("cos",      np.cos,       lambda R, x: R.cos(x),                 "COS"),
]

_BINARY = [  # name,     numpy,          relax lowering,                  Elemwise mode
    ("add",      np.add,         lambda R, a, b: R.add(a, b),      "ADD"),
    ("sub",      np.subtract,    lambda R, a, b: R.subtract(a, b), "SUB"),
    ("mul",      np.multiply,    lambda R, a, b: R.multiply(a, b), "MUL"),
    ("div",      np.true_divide, lambda R, a, b: R.divide(a, b),   "TRUE_DIV"),
    ("maximum",  np.maximum,     lambda R, a, b: R.maximum(a, b),  "MAX_"),
    ("minimum",  np.minimum,     lambda R, a, b: R.minimum(a, b),  "MIN_"),
    ("pow",      np.power,       lambda R, a, b: R.power(a, b),    "POW"),
]


def _unary_infer(x: TensorType) -> TensorType:
    return x


def _binary_infer(name):
    def infer(a: TensorType, b: TensorType) -> TensorType:
        dtype = same_dtype(name, a, b)
        return TensorType(broadcast_shapes(name, a.shape, b.shape), dtype)
    return infer


def _typed(fn):
    """NumPy may widen (int / int -> float64); keep the dtype the rule promised."""
    def eager(*xs):
        out = fn(*xs)
        return np.asarray(out, dtype=xs[0].dtype)
    return eager


def _elemwise(mode: str) -> MgeOpr:
    return MgeOpr("Elemwise", "Elemwise", match={"mode": mode})


for _name, _fn, _lower, _mode in _UNARY:
    register(OpDef(_name, eager=_typed(_fn), infer=_unary_infer,
                   lower=lambda L, x, _l=_lower: _l(L.R, x), mge=_elemwise(_mode)))

for _name, _fn, _lower, _mode in _BINARY:
    register(OpDef(_name, eager=_typed(_fn), infer=_binary_infer(_name),
                   lower=lambda L, a, b, _l=_lower: _l(L.R, a, b), mge=_elemwise(_mode)))

UNARY_NAMES = tuple(r[0] for r in _UNARY)
BINARY_NAMES = tuple(r[0] for r in _BINARY)
