"""Elementwise operators, declared as table rows (MegEngine's Elemwise family)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError
from ..ir import TensorType
from ._rules import broadcast_shapes, same_dtype
from .grad_elemwise import TERNARY_VJPS, binary_vjp, unary_vjp
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, register
from .rounding import lower_round_half_away, round_half_away
from .shape import TYPE_CVT

ELEMWISE = MgeOpr("Elemwise", "Elemwise")


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x):
    """erf in float64 (NumPy has none; math.erf is exact, element by element)."""
    return _ERF(np.asarray(x, np.float64)).astype(np.float64)


def _f64(fn):
    return lambda x: fn(np.asarray(x, np.float64))


def _relu6(x):
    return np.minimum(np.maximum(x, 0), 6)


def _fast_tanh(x):
    """MegEngine's FAST_TANH, a rational approximation of tanh, in the input's float dtype
    step for step as its kernel computes it."""
    f = x.dtype.type
    return x * (f(27) + x * x) / (f(27) + f(9) * x * x)


def _lower_fast_tanh(L, x):
    R = L.R
    x2 = R.multiply(x, x)
    return R.divide(R.multiply(x, R.add(_c(L, 27), x2)),
                    R.add(_c(L, 27), R.multiply(R.multiply(_c(L, 9), x), x)))


def hswish_float32(z):
    """MegEngine's CPU H_SWISH kernel (its SIMD lanes) in z's float dtype:
    z * min(max(z + 3, 0), 6) * (1 / 6)."""
    f = z.dtype.type
    return z * np.minimum(np.maximum(z + f(3), f(0)), f(6)) * f(1 / 6)


def _lower_hswish_sum(L, a, b):
    R = L.R
    z = R.add(a, b)
    return R.multiply(R.multiply(z, R.clip(R.add(z, _c(L, 3)), 0.0, 6.0)), _c(L, 1 / 6))


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


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
    ("sqrt",     np.sqrt,      lambda R, x: R.sqrt(x),                "SQRT"),
    ("square",   np.square,    lambda R, x: R.multiply(x, x),         "SQUARE"),
    ("round",    round_half_away, lower_round_half_away,                 "ROUND"),
    ("log1p",    np.log1p,     lambda L, x: _log1p(L, x),                   "LOG1P"),
    ("expm1",    np.expm1,     lambda L, x: _expm1(L, x),                   "EXPM1"),
    ("erf",      erf,          lambda R, x: R.erf(x),                 "ERF"),
    ("relu6",    _relu6,       lambda R, x: R.clip(x, 0.0, 6.0),      "RELU6"),
    ("silu",     _f64(lambda x: x * _sigmoid(x)), lambda R, x: R.nn.silu(x), "SILU"),
    ("gelu",     _f64(lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))),
     lambda R, x: R.nn.gelu(x),                                            "GELU"),
    ("hswish",   _f64(lambda x: x * _relu6(x + 3) / 6),
     lambda L, x: L.R.divide(L.R.multiply(x, L.R.clip(L.R.add(x, _c(L, 3)), 0.0, 6.0)),
                             _c(L, 6)),                                   "H_SWISH"),
    ("hsigmoid", _f64(lambda x: _relu6(x + 3) / 6),
     lambda L, x: L.R.divide(L.R.clip(L.R.add(x, _c(L, 3)), 0.0, 6.0), _c(L, 6)), "HSIGMOID"),
    ("softplus", _f64(_softplus),
     lambda L, x: L.R.add(_log1p_exp_neg_abs(L, x), L.R.nn.relu(x)),
     "SOFTPLUS"),
    ("fast_tanh", _fast_tanh, _lower_fast_tanh,                           "FAST_TANH"),
    ("logsigmoid", _f64(lambda x: -_softplus(-x)),
     lambda L, x: L.R.negative(L.R.add(_log1p_exp_neg_abs(L, x),
                                       L.R.nn.relu(L.R.negative(x)))),   "LOGSIGMOID"),
]

def _mod(a, b):
    """MegEngine's MOD: C's fmod for floats (the dividend's sign), Python's floor modulo
    for integers (the divisor's: -4 % 3 is 2)."""
    return np.fmod(a, b) if a.dtype.kind == "f" else np.mod(a, b)


def _lower_mod(L, a, b):
    R = L.R
    return (R.mod if L.types[0].dtype.startswith(("float", "bfloat")) else R.floor_mod)(a, b)


_BINARY = [  # name,     numpy,          relax lowering,                  Elemwise mode
    ("add",      np.add,         lambda R, a, b: R.add(a, b),      "ADD"),
    ("sub",      np.subtract,    lambda R, a, b: R.subtract(a, b), "SUB"),
    ("mul",      np.multiply,    lambda R, a, b: R.multiply(a, b), "MUL"),
    ("div",      np.true_divide, lambda R, a, b: R.divide(a, b),   "TRUE_DIV"),
    ("maximum",  np.maximum,     lambda R, a, b: R.maximum(a, b),  "MAX_"),
    ("minimum",  np.minimum,     lambda R, a, b: R.minimum(a, b),  "MIN_"),
    ("pow",      np.power,       lambda R, a, b: R.power(a, b),    "POW"),
    ("floor_div", np.floor_divide, lambda R, a, b: R.floor_divide(a, b), "FLOOR_DIV"),
    ("mod",      _mod,           _lower_mod,                       "MOD"),
]

# Comparisons give bool. MegEngine 1.13 writes them as Elemwise (same-dtype 0/1) + TypeCvt
# to Bool; `gt`/`ge` are LT/LEQ with swapped operands.
_COMPARE = [  # name,  numpy,          relax lowering,                  mode, swap
    ("lt",       np.less,          lambda R, a, b: R.less(a, b),          "LT",  False),
    ("le",       np.less_equal,    lambda R, a, b: R.less_equal(a, b),    "LEQ", False),
    ("gt",       np.greater,       lambda R, a, b: R.greater(a, b),       "LT",  True),
    ("ge",       np.greater_equal, lambda R, a, b: R.greater_equal(a, b), "LEQ", True),
    ("eq",       np.equal,         lambda R, a, b: R.equal(a, b),         "EQ",  False),
]

_LOGICAL = [  # bool operands and result
    ("logical_and", np.logical_and, lambda R, a, b: R.logical_and(a, b), "AND"),
    ("logical_or",  np.logical_or,  lambda R, a, b: R.logical_or(a, b),  "OR"),
    ("logical_xor", np.logical_xor, lambda R, a, b: R.logical_xor(a, b), "XOR"),
]


def _c(L, value):
    return L.const(value, L.out.dtype)


def _one(L):
    return _c(L, 1.0)


def _log1p(L, x):
    """log(1 + x) without losing a small x (Goldberg): with u = 1 + x rounded,
    log(u) * x / (u - 1) cancels the rounding error (u == 1: log1p(x) == x). Only
    |x| < 1 needs it; elsewhere (inf, nan too) log(1 + x) is exact enough."""
    R = L.R
    u = R.add(x, _one(L))
    um1 = R.subtract(u, _one(L))
    small = R.where(R.equal(um1, _c(L, 0.0)), x, R.divide(R.multiply(R.log(u), x), um1))
    return R.where(R.less(R.abs(x), _one(L)), small, R.log(u))


def _expm1(L, x):
    """exp(x) - 1 without losing a small x (Kahan): (u - 1) * x / log(u), u = exp(x)
    (u == 1: expm1(x) == x). Only |x| < 1 needs it."""
    R = L.R
    u = R.exp(x)
    um1 = R.subtract(u, _one(L))
    small = R.where(R.equal(um1, _c(L, 0.0)), x, R.divide(R.multiply(um1, x), R.log(u)))
    return R.where(R.less(R.abs(x), _one(L)), small, um1)


def _log1p_exp_neg_abs(L, x):
    R = L.R
    return R.log(R.add(R.exp(R.negative(R.abs(x))), _one(L)))


def _unary_infer(x: TensorType) -> TensorType:
    return x


def _binary_infer(name):
    def infer(a: TensorType, b: TensorType) -> TensorType:
        dtype = same_dtype(name, a, b)
        return TensorType(broadcast_shapes(name, a.shape, b.shape), dtype)
    return infer


def _typed(fn):
    """NumPy may widen (int / int -> float64); keep the dtype the rule promised. NumPy's
    floating-point warnings (log(0), 0 / 0) are not MegEngine's: its kernels give the
    inf or nan without a word."""
    def eager(*xs):
        with np.errstate(all="ignore"):
            out = fn(*xs)
        return np.asarray(out, dtype=xs[0].dtype)
    return eager


def _elemwise(mode: str) -> MgeOpr:
    return MgeOpr("Elemwise", "Elemwise", match={"mode": mode})


_NEEDS_CONTEXT = {"round", "log1p", "expm1", "hswish", "hsigmoid", "softplus", "logsigmoid",
                  "fast_tanh"}

for _name, _fn, _lower, _mode in _UNARY:
    _lo = _lower if _name in _NEEDS_CONTEXT else (lambda L, x, _l=_lower: _l(L.R, x))
    register(OpDef(_name, eager=_typed(_fn), infer=_unary_infer, lower=_lo,
                   mge=_elemwise(_mode), vjp=unary_vjp(_name)))

for _name, _fn, _lower, _mode in _BINARY:
    _lo = _lower if _name == "mod" else (lambda L, a, b, _l=_lower: _l(L.R, a, b))
    register(OpDef(_name, eager=_typed(_fn), infer=_binary_infer(_name), lower=_lo,
                   mge=_elemwise(_mode), vjp=binary_vjp(_name)))



def _compare_infer(name):
    def infer(a: TensorType, b: TensorType) -> TensorType:
        same_dtype(name, a, b)
        return TensorType(broadcast_shapes(name, a.shape, b.shape), "bool")
    return infer


def _compare_emit(mode: str, swap: bool) -> MgeComposite:
    def emit(em, types, params, inputs):
        a, b = inputs[::-1] if swap else inputs
        out = em.opr(ELEMWISE, {"mode": mode}, [a, b])
        return em.opr(TYPE_CVT, TYPE_CVT.fields({"dtype": "bool"}), [out])
    return MgeComposite(emit)


for _name, _fn, _lower, _mode, _swap in _COMPARE:
    register(OpDef(_name, eager=_fn, infer=_compare_infer(_name),
                   lower=lambda L, a, b, _l=_lower: _l(L.R, a, b),
                   mge=_compare_emit(_mode, _swap), vjp=NOT_DIFFERENTIABLE))


def _logical_infer(name):
    def infer(a: TensorType, b: TensorType) -> TensorType:
        if a.dtype != "bool" or b.dtype != "bool":
            raise DTypeError(f"{name}: operands must be bool; got {a} and {b}")
        return TensorType(broadcast_shapes(name, a.shape, b.shape), "bool")
    return infer


for _name, _fn, _lower, _mode in _LOGICAL:
    register(OpDef(_name, eager=_fn, infer=_logical_infer(_name),
                   lower=lambda L, a, b, _l=_lower: _l(L.R, a, b), mge=_elemwise(_mode),
                   vjp=NOT_DIFFERENTIABLE))


def _not_infer(x: TensorType) -> TensorType:
    if x.dtype != "bool":
        raise DTypeError(f"logical_not: operand must be bool; got {x}")
    return x


register(OpDef("logical_not", eager=np.logical_not, infer=_not_infer,
               lower=lambda L, x: L.R.logical_not(x), mge=_elemwise("NOT"),
               vjp=NOT_DIFFERENTIABLE))

UNARY_NAMES = tuple(r[0] for r in _UNARY)
BINARY_NAMES = tuple(r[0] for r in _BINARY)
COMPARE_NAMES = tuple(r[0] for r in _COMPARE)
LOGICAL_NAMES = tuple(r[0] for r in _LOGICAL) + ("logical_not",)


# MegEngine's fused Elemwise modes: what optimize_for_inference writes for add+relu and
# x*scale+bias (and what MegEngine's optimized files contain).
_FUSED = [  # name,        arity, numpy,                                 relax,                      mode
    ("fuse_add_relu",    2, lambda a, b: np.maximum(a + b, 0),          lambda R, a, b: R.nn.relu(R.add(a, b)), "FUSE_ADD_RELU"),
    ("fuse_add_sigmoid", 2, lambda a, b: _sigmoid(a + b),               lambda R, a, b: R.sigmoid(R.add(a, b)), "FUSE_ADD_SIGMOID"),
    ("fuse_add_tanh",    2, lambda a, b: np.tanh(a + b),                lambda R, a, b: R.tanh(R.add(a, b)),    "FUSE_ADD_TANH"),
    ("fuse_mul_add3",    3, lambda a, b, c: a * b + c,                  lambda R, a, b, c: R.add(R.multiply(a, b), c), "FUSE_MUL_ADD3"),
    ("fuse_add_h_swish", 2, lambda a, b: hswish_float32(a + b),              _lower_hswish_sum,                      "FUSE_ADD_H_SWISH"),
    # x <= y ? z : 0
    ("cond_leq_mov",     3, lambda a, b, c: np.where(a <= b, c, np.zeros((), c.dtype)),
     lambda R, a, b, c: R.where(R.less_equal(a, b), c, R.zeros_like(c)),                  "COND_LEQ_MOV"),
]


def _nary_infer(name, arity):
    def infer_all(*ts: TensorType) -> TensorType:
        dtype = same_dtype(name, *ts)
        return TensorType(broadcast_shapes(name, *(t.shape for t in ts)), dtype)
    if arity == 2:
        return lambda a, b: infer_all(a, b)
    return lambda a, b, c: infer_all(a, b, c)


for _name, _arity, _fn, _lower, _mode in _FUSED:
    register(OpDef(_name, eager=_typed(_fn), infer=_nary_infer(_name, _arity),
                   lower=_lower if _name == "fuse_add_h_swish" else
                   (lambda L, *xs, _l=_lower: _l(L.R, *xs)), mge=_elemwise(_mode),
                   vjp=TERNARY_VJPS[_name] if _arity == 3 else binary_vjp(_name)))
