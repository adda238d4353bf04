"""`autocast`: mixed precision for a block or a function (MegEngine's amp.autocast)."""
from __future__ import annotations

import functools
from typing import Callable

from .. import config as _config
from ..core.tensor import amp as _state


class autocast:
    """Context manager and decorator turning amp on: `enabled`, `low_prec_dtype` (what
    convolutions and matrix products run in, default float16) and `high_prec_dtype`
    (what precision-sensitive ops run in, default float32). The previous settings come
    back on exit. With `enabled=False` it changes nothing."""

    def __init__(self, enabled: bool = True, low_prec_dtype: str = "float16",
                 high_prec_dtype: str = "float32"):
        self.enabled = enabled
        self.high_prec_dtype = high_prec_dtype
        self.low_prec_dtype = low_prec_dtype
        self._origin = None
        self._origin_configs = None

    def __enter__(self) -> "autocast":
        if self.enabled:
            self._origin = (_state._enabled, _state._get_amp_high_prec_dtype(),
                            _state._get_amp_low_prec_dtype())
            _state._set_amp_high_prec_dtype(self.high_prec_dtype)
            _state._set_amp_low_prec_dtype(self.low_prec_dtype)
            _state._enabled = True
            _state._set_amp_dtype_autocast(True)
            self._origin_configs = _config._reset_execution_config(compute_mode="float32")
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            enabled, high, low = self._origin
            _state._enabled = enabled
            _state._set_amp_dtype_autocast(enabled)
            _state._set_amp_high_prec_dtype(high)
            _state._set_amp_low_prec_dtype(low)
            _config._reset_execution_config(*self._origin_configs)

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper
