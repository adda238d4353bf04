"""Which operators run in which precision under autocast (MegEngine 1.13's
DTypePromoteTransformation rules, keyed by megtrace's op names).

- convolutions and matrix products: every input in the low precision dtype (they
  accumulate in float32, MegEngine's compute_mode FLOAT32);
- BatchNorm (composed in megtrace.functional.batchnorm, which casts itself): the data in
  the low dtype, its parameters and statistics in the high one;
- LayerNorm: everything in the high dtype;
- elementwise ops that lose precision in float16 (exp, log, pow, division, sqrt,
  trigonometric, softplus, ...): inputs in the high dtype.
Other ops run on their inputs as they come.
"""
from __future__ import annotations

import numpy as np

from .. import dispatch
from ..core.tensor import amp as _state
from ..ops import OpDef

_LOW = frozenset({"conv2d", "conv_transpose2d", "matmul", "deformable_conv2d"})
_HIGH = frozenset({
    "div", "exp", "pow", "log", "expm1", "log1p", "acos", "asin", "atan2", "cos", "sin",
    "logaddexp", "tan", "asinh", "acosh", "atanh", "sinh", "cosh", "softplus", "hsigmoid",
    "logsigmoid", "sqrt", "layer_norm"})


def _to(t, dtype: str):
    if t.dtype.name == dtype or np.dtype(t.dtype).kind not in "fiub":
        return t
    return dispatch.apply("astype", t, dtype=dtype)


def _cast(op: OpDef, inputs: tuple, params: dict) -> tuple[tuple, dict]:
    name = op.name
    if name in _LOW:
        low = _state._low_prec_dtype
        if "compute_mode" in op.params:         # float32 accumulation, as MegEngine sets
            params = {**params, "compute_mode": "FLOAT32"}
        return tuple(_to(t, low) for t in inputs), params
    if name in _HIGH:
        high = _state._high_prec_dtype
        return tuple(_to(t, high) for t in inputs), params
    return inputs, params


def _install(enabled: bool) -> None:
    dispatch.autocast = _cast if enabled else None


_state._on_autocast_change = _install
_install(_state._autocast)
