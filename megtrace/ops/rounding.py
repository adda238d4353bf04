"""MegEngine's ROUND: C `round`, halves away from zero (NumPy and TVM round halves to
even), for the round op and the fake-quantization ops."""
from __future__ import annotations

import numpy as np


def round_half_away(x: np.ndarray) -> np.ndarray:
    """|x| - floor(|x|) is exact in floating point, so no rounding error can move a value
    across the half."""
    if x.dtype.kind != "f":
        return x.copy()
    a = np.abs(x)
    t = np.floor(a)
    return np.copysign(t + (a - t >= 0.5).astype(x.dtype), x).astype(x.dtype)


def lower_round_half_away(L, x):
    """The Relax form of `round_half_away`."""
    R = L.R
    if not L.types[0].dtype.startswith("float"):
        return x
    a = R.abs(x)
    t = R.floor(a)
    one, zero, half = (L.const(v, L.types[0].dtype) for v in (1.0, 0.0, 0.5))
    up = R.where(R.greater_equal(R.subtract(a, t), half), one, zero)
    r = R.add(t, up)
    return R.where(R.less(x, zero), R.negative(r), r)
