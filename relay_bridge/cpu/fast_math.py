"""Vectorizable float32 exp / erf / tanh / sigmoid (and the softmax and GELU built on them).

TVM 0.27's LLVM codegen lowers these to libm calls (`expf`, `erff`) one lane at a time,
so a vectorized loop over them runs scalar: GELU's erf and softmax's exp cost more than
the GEMMs around them on the encoder. Here each is plain float32 arithmetic that LLVM
vectorizes, accurate to ~1e-6 relative (the tests check 1e-5 against float64 NumPy):

- exp: x = n ln2 + r (Cody-Waite, |r| <= ln2/2), exp(r) by its degree-7 Taylor
  polynomial, 2^n built in the exponent bits as two factors (so that n = 128
  stays representable); below ln(min normal) the result is 0, above ln(FLT_MAX) inf.
- erf, tanh: odd rationals x P(x^2) / Q(x^2) on the clamped input, coefficients fitted
  by weighted least squares for relative error (`bench/fit_fast_math.py` refits them).
- sigmoid: 1 / (1 + exp(-x)) with the exp above.
NaN passes through each.

MEGTRACE_FAST_MATH=0 (or off/false) keeps TVM's libm calls; the compile cache keys on
it (`mode()`). Only float32 values change; other dtypes keep TVM's lowering.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from .._tvm import tvm

ENV = "MEGTRACE_FAST_MATH"

LN2_HI = 0.693145751953125            # ln 2 = LN2_HI + LN2_LO, LN2_HI exact in 12 bits
LN2_LO = 1.428606765330187e-06
LOG2E = 1.4426950408889634
EXP_LO = -87.33654                    # ln(smallest normal float32)
EXP_HI = 88.72283                     # ln(FLT_MAX)
ERF_CLAMP = 3.92                      # erf(3.92) rounds to 1 in float32
ERF_P = (1.1283796852007935, 0.38030464120962637, 0.07468690533153621,
         0.010904083409118736, 0.0002743795903063995, -1.5494091701229428e-06)
ERF_Q = (1.0, 0.6703675985220643, 0.18967695868815035, 0.02957974132284019,
         0.002563053529960819)
TANH_CLAMP = 9.0                      # tanh(9) rounds to 1 in float32
TANH_P = (0.9999994461505588, 0.12622934968963595, 0.0026067529075830902,
          6.515058395940282e-06, -5.047906732689937e-09)
TANH_Q = (1.0, 0.45955855513512517, 0.022464788425547978, 0.00018541559826418692)


def mode() -> str:
    """"on" (the default) or "off", from MEGTRACE_FAST_MATH."""
    value = os.environ.get(ENV, "1").strip().lower()
    return "off" if value in ("0", "off", "false", "no") else "on"


def enabled() -> bool:
    return mode() == "on"


def _f(v: float):
    return tvm().tirx.const(v, "float32")


def _bind(value, body: Callable[[Any], Any], name: str):
    """body(v) with `value` computed once (a Let), unless it is already a variable/constant."""
    t = tvm().tirx
    if isinstance(value, (t.Var, t.FloatImm, t.IntImm)):
        return body(value)
    var = t.Var(name, "float32")            # every bound value here is float32
    return t.Let(var, value, body(var))


def _horner(u, coeffs):
    acc = _f(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = acc * u + _f(c)
    return acc


def _nan_through(x, value):
    """x where it is NaN, else value. NaN is tested on the bits (exponent all ones,
    mantissa not 0): `isnan` (x == x would be simplified to true) makes LLVM split a
    16-lane loop into two 8-lane halves on AVX-512 hosts it tunes for 256-bit vectors
    (rocketlake, icelake), doubling the cost of every kernel that uses these."""
    t = tvm().tirx
    bits = t.reinterpret("int32", x) & t.const(0x7FFFFFFF, "int32")
    return t.Select(bits > t.const(0x7F800000, "int32"), x, value)


def _pow2(k):
    """2.0 ** k for int32 k in [-126, 127], through the exponent bits."""
    t = tvm().tirx
    bits = t.shift_left(k + t.const(127, "int32"), t.const(23, "int32"))
    return t.reinterpret("float32", bits)


def fast_exp(x):
    t = tvm().tirx

    def body(x):
        xc = t.min(t.max(x, _f(EXP_LO)), _f(EXP_HI))

        def with_n(n):
            r = xc - n * _f(LN2_HI) - n * _f(LN2_LO)
            taylor = (1.0, 1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040)
            poly = _bind(r, lambda r: _horner(r, taylor), "exp_r")
            k = t.Cast("int32", n)
            half = t.shift_right(k, t.const(1, "int32"))
            value = poly * _pow2(half) * _pow2(k - half)
            value = t.Select(x < _f(EXP_LO), _f(0.0),
                             t.Select(x > _f(EXP_HI), _f(float("inf")), value))
            return _nan_through(x, value)
        return _bind(t.floor(xc * _f(LOG2E) + _f(0.5)), with_n, "exp_n")
    return _bind(x, body, "exp_x")


def _odd_rational(x, clamp: float, p, q, name: str):
    t = tvm().tirx

    def body(x):
        def with_xc(xc):
            return _bind(xc * xc, lambda u: xc * _horner(u, p) / _horner(u, q), name + "_u")
        return _nan_through(x, _bind(t.min(t.max(x, _f(-clamp)), _f(clamp)), with_xc,
                                     name + "_c"))
    return _bind(x, body, name + "_x")


def fast_erf(x):
    return _odd_rational(x, ERF_CLAMP, ERF_P, ERF_Q, "erf")


def fast_tanh(x):
    return _odd_rational(x, TANH_CLAMP, TANH_P, TANH_Q, "tanh")


def fast_sigmoid(x):
    return _f(1.0) / (_f(1.0) + fast_exp(-x))


def fast_gelu(x):
    """x * (1/2 + erf(x / sqrt 2) / 2), as megtrace's GELU (Relax's nn.gelu) computes it."""
    return _bind(x, lambda x: x * (_f(0.5) + fast_erf(x * _f(0.7071067811865476)) * _f(0.5)),
                 "gelu_x")


# -- TVM's libm-backed forms, for MEGTRACE_FAST_MATH=0 -------------------------------
def _libm(name: str):
    return lambda x: getattr(tvm().tirx, name)(x)


def _libm_gelu(x):
    t = tvm().tirx
    return x * (_f(0.5) + t.erf(x * _f(0.7071067811865476)) * _f(0.5))


FAST = {"exp": fast_exp, "erf": fast_erf, "tanh": fast_tanh, "sigmoid": fast_sigmoid,
        "gelu": fast_gelu}
LIBM = {"exp": _libm("exp"), "erf": _libm("erf"), "tanh": _libm("tanh"),
        "sigmoid": _libm("sigmoid"), "gelu": _libm_gelu}


def unary(name: str) -> Callable[[Any], Any]:
    """The PrimExpr builder for `name` (exp/erf/tanh/sigmoid/gelu) under the current mode."""
    return (FAST if enabled() else LIBM)[name]
