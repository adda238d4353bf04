"""Adadelta (Zeiler): steps scaled by running averages of squared gradients and of
squared past steps."""
from __future__ import annotations

from typing import Iterable, Union

from ..tensor import Parameter
from .optimizer import Optimizer, hyper, scalar


class Adadelta(Optimizer):
    """Adadelta: lr 1.0, rho 0.9, eps 1e-6, weight_decay 0."""

    def __init__(self, params: Union[Iterable[Parameter], dict], lr: float = 1.0,
                 rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0.0):
        assert lr >= 0.0, "Invalid learning rate: {}".format(lr)
        assert rho >= 0.0 and rho <= 1.0, "Invalid rho value: {}".format(rho)
        assert eps >= 0.0, "Invalid epsilon value: {}".format(eps)
        assert weight_decay >= 0.0, "Invalid weight_decay value: {}".format(weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay))
        self._disable_type_convert = True

    def _create_state(self, param_group: dict) -> None:
        for param in param_group["params"]:
            self._add_state(param, "square_avg")
            self._add_state(param, "acc_delta")
            self._add_state(param, "step", initializer=0.0)

    def _updates(self, param_group: dict) -> None:
        weight_decay = param_group["weight_decay"]
        _lr, _rho, _eps = (hyper(param_group["lr"]), hyper(param_group["rho"]),
                           hyper(param_group["eps"]))
        c1, c2, c05 = scalar(1.0), scalar(2.0), scalar(0.5)
        for param in param_group["params"]:
            if param.grad is None:
                continue
            states = self._state[param]
            step = states["step"]
            step += c1
            grad = param.grad
            if weight_decay != 0.0:
                grad = grad + param * hyper(weight_decay)
            square_avg = _rho * states["square_avg"] + (c1 - _rho) * grad ** c2
            delta = (states["acc_delta"] + _eps) ** c05 / (square_avg + _eps) ** c05 * grad
            param -= _lr * delta
            acc_delta = _rho * states["acc_delta"] + (c1 - _rho) * delta ** c2
            states["square_avg"]._reset(square_avg)
            states["acc_delta"]._reset(acc_delta)
