"""Automatic mixed precision (MegEngine's `megengine.amp`): `autocast` runs convolutions
and matrix products in float16 (float32 accumulation) and keeps precision-sensitive ops
in float32; `GradScaler` scales the loss so float16 gradients do not underflow;
`convert_tensor_format` / `convert_module_format` mark tensors NHWC.

`amp.enabled`, `amp.high_prec_dtype` and `amp.low_prec_dtype` are module properties, as
in MegEngine."""
import sys
import types

from ..core.tensor import amp as _state
from . import _rules  # noqa: F401  (installs the dispatch rules when autocast turns on)
from .autocast import autocast
from .convert_format import convert_module_format, convert_tensor_format
from .grad_scaler import GradScaler

__all__ = ["autocast", "convert_module_format", "convert_tensor_format", "GradScaler",
           "enabled", "high_prec_dtype", "low_prec_dtype"]


class _AmpModule(types.ModuleType):
    @property
    def enabled(self) -> bool:
        return _state._enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        _state.enabled = value

    @property
    def high_prec_dtype(self) -> str:
        return _state._high_prec_dtype

    @high_prec_dtype.setter
    def high_prec_dtype(self, dtype) -> None:
        _state.high_prec_dtype = dtype

    @property
    def low_prec_dtype(self) -> str:
        return _state._low_prec_dtype

    @low_prec_dtype.setter
    def low_prec_dtype(self, dtype) -> None:
        _state.low_prec_dtype = dtype


sys.modules[__name__].__class__ = _AmpModule
