"""Adam (Kingma & Ba) with L2 weight decay added to the gradient."""
from __future__ import annotations

from typing import Iterable, Tuple, Union

from ..tensor import Parameter
from ._adam_moments import adam_direction, add_adam_state, check_adam_args
from .optimizer import Optimizer, hyper, inplace_add_, inplace_update_mode, scalar


class Adam(Optimizer):
    """Adam: betas (0.9, 0.999), eps 1e-8, weight_decay 0 (an L2 term in the gradient)."""

    def __init__(self, params: Union[Iterable[Parameter], dict], lr: float,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        check_adam_args(lr, weight_decay, betas)
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, betas=betas, eps=eps))
        self._disable_type_convert = True

    def _create_state(self, param_group: dict) -> None:
        add_adam_state(self, param_group)

    def _updates(self, param_group: dict) -> None:
        lr, weight_decay = param_group["lr"], param_group["weight_decay"]
        beta0, beta1 = param_group["betas"]
        fused = inplace_update_mode()
        for param in param_group["params"]:
            if param.grad is None:
                continue
            grad = param.grad
            if weight_decay != 0.0:
                grad = grad + param * hyper(weight_decay)
            delta = adam_direction(self._state[param], grad, beta0, beta1,
                                   param_group["eps"], fused)
            if fused:
                inplace_add_(param, delta, scalar(1.0), hyper(-lr))
            else:
                param -= hyper(lr) * delta
