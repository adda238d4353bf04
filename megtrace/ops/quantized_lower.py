"""Relax pieces for MegEngine's quantized dtypes, step for step as
megtrace/ops/quantized_eager.py computes them, so that compiled graphs give the same
integers: TypeCvt in float32 (q * scale; x / scale, round half away from zero, plus the
zero point, saturated), integer accumulation, and average pooling rounded half away."""
from __future__ import annotations

import numpy as np

from ..dtype import QuantParam
from . import quantized_eager as Q


def _f32(L, value: float):
    return L.const(np.float32(value), "float32")


def round_half_away(L, x):
    """float32 `x` rounded half away from zero (|x| - floor(|x|) is exact)."""
    R = L.R
    a = R.abs(x)
    t = R.floor(a)
    up = R.where(R.greater_equal(R.subtract(a, t), _f32(L, 0.5)), _f32(L, 1.0), _f32(L, 0.0))
    r = R.add(t, up)
    return R.where(R.less(x, _f32(L, 0.0)), R.negative(r), r)


def lower_dequantize(L, x, q: QuantParam):
    """Stored values -> float32 ((q - zero point) * scale)."""
    R = L.R
    v = R.astype(x, "float32")
    if q.zero_point:
        v = R.subtract(v, _f32(L, q.zero_point))
    return R.multiply(v, _f32(L, q.scale))


def saturate(L, r, q: QuantParam):
    """Integral float32 values -> `q`'s storage, saturated to its range (the int32 bound
    applied in int64, as float32 cannot hold it)."""
    R = L.R
    lo, hi = Q._RANGE[q.name]
    if q.storage == "int32":
        wide = R.astype(R.clip(r, float(lo), float(2 ** 31)), "int64")
        return R.astype(R.clip(wide, lo, hi), "int32")
    return R.astype(R.clip(r, float(lo), float(hi)), q.storage)


def lower_quantize(L, v, q: QuantParam):
    """float32 values -> stored values of `q`."""
    R = L.R
    r = round_half_away(L, R.divide(v, _f32(L, q.scale)))
    if q.zero_point:
        r = R.add(r, _f32(L, q.zero_point))
    return saturate(L, r, q)


def lower_centered(L, x, q: QuantParam | None):
    """Stored values minus the zero point, as int32."""
    R = L.R
    v = R.astype(x, "int32")
    if q is not None and q.zero_point:
        v = R.subtract(v, L.const(np.int32(q.zero_point), "int32"))
    return v


def lower_average(L, x, average, count: np.ndarray):
    """Average pooling of stored values: `average(float32 values)` is the float pooling
    and `count` (broadcasting to its result) the number of values each output averages;
    the exact window sums are recovered (round(average * count): integers far below
    float32's 2^24), divided by the counts and rounded half away, as eager does in
    float64 (a quotient of such integers is never within float32 error of a half
    unless it is one)."""
    R = L.R
    c = L.const(np.asarray(count, np.float32), "float32")
    total = R.round(R.multiply(average(R.astype(x, "float32")), c))
    return saturate(L, round_half_away(L, R.divide(total, c)), L.types[0].quant)


def lower_matmul(L, a, b, ta, tb):
    """Quantized matmul: zero points removed, int32 accumulation (QuantizedS32)."""
    return L.R.matmul(lower_centered(L, a, ta.quant), lower_centered(L, b, tb.quant),
                      out_dtype="int32")
