"""Elementwise math beyond the basic table: inverse and hyperbolic trigonometry, sign,
atan2, logaddexp, bit shifts, isnan/isinf.

Each op is written to a .mge the way MegEngine 1.13's dumper writes it: ASIN, ACOS,
ATAN2, LOG_SUM_EXP, SHL and SHR stay single Elemwise modes; TAN, SINH, COSH, ASINH,
ACOSH, ATANH, SIGN, ISNAN and ISINF are rewritten into older modes (so that runtimes
predating those modes load the file), and so are ours.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from ..ir import TensorType
from ._rules import broadcast_shapes, same_dtype
from .grad_elemwise import binary_vjp, unary_vjp
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, register
from .shape import TYPE_CVT

ELEMWISE = MgeOpr("Elemwise", "Elemwise")


def _elemwise(mode: str) -> MgeOpr:
    return MgeOpr("Elemwise", "Elemwise", match={"mode": mode})


def _typed(fn):
    """Compute in float64 where NumPy would, return the operand dtype the rule promised."""
    def eager(*xs):
        with np.errstate(all="ignore"):
            out = fn(*(x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs))
        return np.asarray(out).astype(xs[0].dtype)
    return eager


class _Ew:
    """Emits Elemwise oprs and scalar constants of one dtype (for the composites)."""

    def __init__(self, em, dtype: str):
        self.em, self.dtype = em, dtype

    def __call__(self, mode: str, *inputs: int) -> int:
        return self.em.opr(ELEMWISE, {"mode": mode}, list(inputs))

    def c(self, value: float) -> int:
        return self.em.const(np.array([value], self.dtype))


def _composite(build):
    def emit(em, types, params, inputs):
        return build(_Ew(em, types[0].dtype), *inputs)
    return MgeComposite(emit)


def _sinh(e, x):
    m1 = e("EXPM1", x)     # sinh = (e^x + 1)(e^x - 1) / (2 e^x), all from expm1
    return e("MUL", e("ADD", e.c(2), m1), e("TRUE_DIV", e("MUL", m1, e.c(0.5)),
                                              e("ADD", m1, e.c(1))))


def _cosh(e, x):
    return e("MUL", e.c(0.5), e("ADD", e("EXP", x), e("EXP", e("NEGATE", x))))


def _asinh(e, x):
    root = e("POW", e("ADD", e.c(1), e("POW", x, e.c(2))), e.c(0.5))
    return e("LOG", e("ADD", x, root))


def _acosh(e, x):
    root = e("POW", e("SUB", e("POW", x, e.c(2)), e.c(1)), e.c(0.5))
    return e("LOG", e("ADD", x, root))


def _atanh(e, x):
    ratio = e("TRUE_DIV", e("MUL", x, e.c(2)), e("SUB", e.c(1), x))
    return e("TRUE_DIV", e("LOG1P", ratio), e.c(2))


def _sign(e, x):
    zero = e.c(0)
    return e("SUB", e("LT", zero, x), e("LT", x, zero))


def _sign_np(x: np.ndarray) -> np.ndarray:
    """megdnn's SIGN, `x < 0 ? -1 : (x > 0 ? 1 : 0)`: NaN gives 0 (as TVM's sign does)."""
    return np.where(x > 0, 1, np.where(x < 0, -1, 0)).astype(x.dtype)


_UNARY = [  # name, numpy, relax lowering, how it is written
    ("asin",  np.arcsin,  lambda R, x: R.asin(x),  _elemwise("ASIN")),
    ("acos",  np.arccos,  lambda R, x: R.acos(x),  _elemwise("ACOS")),
    ("tan",   np.tan,     lambda R, x: R.tan(x),
     _composite(lambda e, x: e("TRUE_DIV", e("SIN", x), e("COS", x)))),
    ("sinh",  np.sinh,    lambda R, x: R.sinh(x),  _composite(_sinh)),
    ("cosh",  np.cosh,    lambda R, x: R.cosh(x),  _composite(_cosh)),
    ("asinh", np.arcsinh, lambda R, x: R.asinh(x), _composite(_asinh)),
    ("acosh", np.arccosh, lambda R, x: R.acosh(x), _composite(_acosh)),
    ("atanh", np.arctanh, lambda R, x: R.atanh(x), _composite(_atanh)),
    ("sign",  _sign_np,   lambda R, x: R.sign(x),  _composite(_sign)),
]


def _logaddexp_lower(L, a, b):
    """max(a, b) + log(1 + exp(-|a - b|)): no overflow for large operands."""
    R = L.R
    tail = R.exp(R.negative(R.abs(R.subtract(a, b))))
    return R.add(R.maximum(a, b), R.log(R.add(tail, L.const(1.0, L.out.dtype))))


_BINARY = [  # name, numpy, relax lowering, Elemwise mode, integer operands only
    ("atan2",       np.arctan2,     lambda L, a, b: L.R.atan2(a, b),       "ATAN2",       False),
    ("logaddexp",   np.logaddexp,   _logaddexp_lower,                      "LOG_SUM_EXP", False),
    ("left_shift",  np.left_shift,  lambda L, a, b: L.R.left_shift(a, b),  "SHL",         True),
    ("right_shift", np.right_shift, lambda L, a, b: L.R.right_shift(a, b), "SHR",         True),
]


def _float_infer(name):
    def infer(x: TensorType) -> TensorType:
        if x.dtype not in ("float32", "float16"):
            if name == "sign" and x.dtype in ("int32", "int16", "int8", "uint8"):
                return x
            raise DTypeError(f"{name}: operand must be a float tensor; got {x}")
        return x
    return infer


def _binary_infer(name, integer):
    def infer(a: TensorType, b: TensorType) -> TensorType:
        dtype = same_dtype(name, a, b)
        if integer != (dtype not in ("float32", "float16")):
            kind = "integer" if integer else "float"
            raise DTypeError(f"{name}: operands must be {kind} tensors; got {a} and {b}")
        return TensorType(broadcast_shapes(name, a.shape, b.shape), dtype)
    return infer


for _name, _fn, _lower, _mge in _UNARY:
    register(OpDef(_name, eager=_typed(_fn), infer=_float_infer(_name),
                   lower=lambda L, x, _l=_lower: _l(L.R, x), mge=_mge, vjp=unary_vjp(_name)))

for _name, _fn, _lower, _mode, _int in _BINARY:
    register(OpDef(_name, eager=_typed(_fn), infer=_binary_infer(_name, _int), lower=_lower,
                   mge=_elemwise(_mode),
                   vjp=NOT_DIFFERENTIABLE if _int else binary_vjp(_name)))


# -- isnan / isinf: bool results ---------------------------------------------------------
def _isnan_emit(em, types, params, inputs):
    """NOT(bool(x == x)), as MegEngine dumps ISNAN."""
    (x,) = inputs
    same = em.opr(ELEMWISE, {"mode": "EQ"}, [x, x])
    return em.opr(ELEMWISE, {"mode": "NOT"},
                  [em.opr(TYPE_CVT, TYPE_CVT.fields({"dtype": "bool"}), [same])])


def _isinf_emit(em, types, params, inputs):
    """bool(|x| == inf). (MegEngine's dumper writes x == inf, which misses -inf.)"""
    e = _Ew(em, types[0].dtype)
    hit = e("EQ", e("ABS", inputs[0]), e.c(np.inf))
    return em.opr(TYPE_CVT, TYPE_CVT.fields({"dtype": "bool"}), [hit])


def _check_infer(name):
    def infer(x: TensorType) -> TensorType:
        if x.dtype not in ("float32", "float16"):
            raise DTypeError(f"{name}: operand must be a float tensor; got {x}")
        return TensorType(x.shape, "bool")
    return infer


register(OpDef("isnan", eager=np.isnan, infer=_check_infer("isnan"),
               lower=lambda L, x: L.R.isnan(x), mge=MgeComposite(_isnan_emit),
               vjp=NOT_DIFFERENTIABLE))
register(OpDef("isinf", eager=np.isinf, infer=_check_infer("isinf"),
               lower=lambda L, x: L.R.isinf(x), mge=MgeComposite(_isinf_emit),
               vjp=NOT_DIFFERENTIABLE))

UNARY_NAMES = tuple(r[0] for r in _UNARY)
BINARY_NAMES = tuple(r[0] for r in _BINARY)
