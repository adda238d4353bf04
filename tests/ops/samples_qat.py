"""Samples of the fake-quantization ops (fake_quant, tqt, lsq). Scales are powers of
two, so x / scale is exact and the float64 references see the same halves (which C
rounding sends away from zero) as the float32 kernels."""
from __future__ import annotations

import math

import numpy as np

from .samples import Sample


def _c_round(v: float) -> float:
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _clamp(v: float, lo: int, hi: int) -> float:
    return min(max(v, lo), hi)


def _values(*shape, lo=-40.0, hi=40.0):
    """Uniform values with a few exact halves of the 0.25 grid (0.125 steps)."""
    def make(rng):
        x = rng.uniform(lo, hi, size=shape)
        x.flat[:4] = [0.125, -0.125, 0.375, -31.875]
        return x.astype(np.float32)
    return make


def _const(*values):
    return lambda rng: np.array(values, np.float32)


def _fake_quant_ref(x, scale, zp, *, qmin=-2147483648, qmax=2147483647):
    s, z = float(scale.reshape(-1)[0]), float(zp.reshape(-1)[0])
    out = [(_clamp(_c_round(float(v) / s) + z, qmin, qmax) - z) * s for v in x.reshape(-1)]
    return np.array(out).reshape(x.shape)


def _tqt_ref(x, scale, *, qmin=-2147483648, qmax=2147483647):
    t = 2.0 ** float(scale.reshape(-1)[0])
    out = [_clamp(_c_round(float(v) / t), qmin, qmax) * t for v in x.reshape(-1)]
    return np.array(out).reshape(x.shape)


def _lsq_ref(x, scale, zp, grad_scale, *, qmin=-2147483648, qmax=2147483647):
    s, z = float(scale.reshape(-1)[0]), float(zp.reshape(-1)[0])
    out = [(_c_round(_clamp(float(v) / s + z, qmin, qmax)) - z) * s for v in x.reshape(-1)]
    return np.array(out).reshape(x.shape)


def _maker(*parts):
    return lambda rng: [p(rng) for p in parts]


SAMPLES = [
    Sample("fake_quant", _maker(_values(3, 5), _const(0.25), _const(0.0)),
           {"qmin": -128, "qmax": 127}, _fake_quant_ref, tag="qint8"),
    Sample("fake_quant", _maker(_values(2, 3, 4, lo=-10, hi=70), _const(0.25), _const(37.0)),
           {"qmin": 0, "qmax": 255}, _fake_quant_ref, tag="quint8"),
    Sample("fake_quant", _maker(_values(4, 6), _const(0.5), _const(0.0)),
           {"qmin": -8, "qmax": 7}, _fake_quant_ref, tag="qint4-saturates"),
    Sample("tqt", _maker(_values(3, 5), _const(-2.0)), {"qmin": -127, "qmax": 127}, _tqt_ref),
    Sample("tqt", _maker(_values(2, 7), _const(1.0)), {"qmin": -8, "qmax": 7}, _tqt_ref,
           tag="saturates"),
    Sample("lsq", _maker(_values(3, 5), _const(0.25), _const(2.0), _const(0.5)),
           {"qmin": -128, "qmax": 127}, _lsq_ref),
    Sample("lsq", _maker(_values(2, 6), _const(0.5), _const(0.0), _const(1.0)),
           {"qmin": -8, "qmax": 7}, _lsq_ref, tag="saturates"),
]

BAD = [
    ("fake_quant", [(2, 3), (4,), (1,)], {}, "ShapeError", "broadcast"),
    ("tqt", [(2, 3), (2, 1, 3)], {}, "ShapeError", "broadcast"),
    ("lsq", [(2, 3), (1,), (1,), (5,)], {}, "ShapeError", "broadcast"),
]

# MegEngine's ROUND sends halves away from zero (NumPy and TVM would round them to even)
SAMPLES.append(Sample(
    "round", lambda rng: [np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -3.2, 7.0],
                                   np.float32)],
    {}, lambda x: np.array([_c_round(float(v)) for v in x]), tag="halves"))
