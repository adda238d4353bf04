"""`QParams`: the quantization parameters a Tensor carries (MegEngine's
megengine.quantization.utils.QParams), kept so that tensors pickle as MegEngine's do."""
from __future__ import annotations

from enum import Enum
from typing import Any


class QuantMode(Enum):
    """MegEngine's quantization modes (its spelling)."""

    SYMMERTIC = 1
    ASYMMERTIC = 2


class QParams:
    """mode, dtype_meta, scale and zero_point of a quantized tensor (any may be None)."""

    __slots__ = "mode", "dtype_meta", "scale", "zero_point"

    def __init__(self, mode: QuantMode | None, dtype_meta: Any, scale: Any, zero_point: Any):
        self.mode = mode
        self.dtype_meta = dtype_meta
        self.scale = scale
        self.zero_point = zero_point

    def update(self, qparams: "QParams") -> None:
        for key in self.__slots__:
            setattr(self, key, getattr(qparams, key))

    def __eq__(self, other) -> bool:
        if not isinstance(other, QParams) or len(self.__slots__) != len(other.__slots__):
            return False
        return all(getattr(self, k) is getattr(other, k) or getattr(self, k) == getattr(other, k)
                   for k in self.__slots__)

    __hash__ = None

    def __repr__(self) -> str:
        return "QParams({})".format(", ".join(f"{k}={getattr(self, k)}" for k in self.__slots__))

    def __getstate__(self):
        return None, {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state) -> None:
        slots = state[1] if isinstance(state, tuple) else state
        for k, v in (slots or {}).items():
            setattr(self, k, v)


def create_qparams(mode: QuantMode | None = QuantMode.SYMMERTIC, dtype_meta: Any = None,
                   scale: Any = None, zero_point: Any = None) -> QParams:
    """Empty (or given) quantization parameters, as MegEngine's create_qparams."""
    if mode is not None and not isinstance(mode, QuantMode):
        raise TypeError(f"create_qparams: mode must be a QuantMode or None; got {mode!r}")
    return QParams(mode, dtype_meta, scale, zero_point)
