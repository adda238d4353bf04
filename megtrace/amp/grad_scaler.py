"""`GradScaler`: loss scaling for float16 training (MegEngine's amp.GradScaler)."""
from __future__ import annotations

from typing import Iterable, List, Optional, Union

from ..autodiff import GradManager
from ..functional import full_like
from ..functional.math import _check_non_finite
from ..tensor import Tensor


class GradScaler:
    """Multiplies the output gradient by `scale_factor` before backward, so small float16
    gradients do not flush to zero, and divides the parameters' gradients by it after.
    When a gradient is inf/NaN the step's gradients are dropped (set to None) and the
    factor shrinks by `backoff_factor`; after `growth_interval` clean steps it grows by
    `growth_factor`. `growth_interval=0` keeps the factor fixed and never checks."""

    def __init__(self, init_scale: float = 2.0 ** 4, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000):
        self.scale_factor = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = growth_interval
        self._growth_tracker = 0
        self._found_non_finite = False

    def backward(self, gm: GradManager, y: Union[Tensor, List[Tensor], None] = None,
                 dy: Union[Tensor, List[Tensor], None] = None, *, unscale_grad: bool = True,
                 update_scale: bool = "if_unscale_grad"):
        """`gm.backward(y, dy * scale_factor)` (dy defaults to ones), then, with
        `unscale_grad`, `unscale` the attached tensors' gradients and (`update_scale`)
        `update` the factor. Pass `unscale_grad=False` to accumulate several batches."""
        ys = [] if y is None else list(y) if isinstance(y, (tuple, list)) else [y]
        if dy is None:
            dys = [full_like(t, self.scale_factor) for t in ys]
        elif isinstance(dy, (tuple, list)):
            dys = [d * self.scale_factor for d in dy]
        else:
            dys = [dy * self.scale_factor]
        gm.backward(y=ys, dy=dys)
        if unscale_grad:
            self.unscale(gm.attached_tensors())
            if update_scale:
                self.update()

    def unscale(self, grad_tensors: Iterable[Tensor]) -> "GradScaler":
        """Divide the gradients of `grad_tensors` by the factor; if any is inf/NaN, drop
        them all (grad = None) and remember it for `update`."""
        tensors = [t for t in grad_tensors if t is not None and getattr(t, "grad", None)
                   is not None]
        if self.growth_interval == 0:
            inv_scale = Tensor(1.0 / self.scale_factor)
            for t in tensors:
                t.grad *= inv_scale
            return self
        if tensors and _check_non_finite([t.grad for t in tensors],
                                         1.0 / self.scale_factor).numpy():
            self._found_non_finite = True
            for t in tensors:
                t.grad = None
        return self

    def update(self, new_scale: Optional[float] = None) -> None:
        """Set the factor to `new_scale`, or shrink it after a non-finite gradient and grow
        it after `growth_interval` clean steps."""
        if self.growth_interval == 0:
            return
        if new_scale is not None:
            self.scale_factor = float(new_scale)
        elif self._found_non_finite:
            self.scale_factor *= self.backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker >= self.growth_interval:
                self.scale_factor *= self.growth_factor
                self._growth_tracker = 0
        self._found_non_finite = False

    def state_dict(self) -> dict:
        return {"scale_factor": self.scale_factor, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: dict) -> None:
        self.scale_factor = state["scale_factor"]
        self.growth_factor = state["growth_factor"]
        self.backoff_factor = state["backoff_factor"]
        self.growth_interval = state["growth_interval"]
        self._growth_tracker = state["_growth_tracker"]
