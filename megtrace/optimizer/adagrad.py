"""Adagrad (Duchi et al.): per-element steps scaled by the root of the summed squared
gradients, with the learning rate decayed as lr / (1 + (step - 1) * lr_decay)."""
from __future__ import annotations

from typing import Iterable, Union

from ..tensor import Parameter
from .optimizer import Optimizer, hyper, scalar


class Adagrad(Optimizer):
    """Adagrad: lr 1e-2, lr_decay 0, eps 1e-10, weight_decay 0."""

    def __init__(self, params: Union[Iterable[Parameter], dict], lr: float = 1e-2,
                 lr_decay: float = 0.0, eps: float = 1e-10, weight_decay: float = 0.0):
        assert lr >= 0.0, "Invalid learning rate: {}".format(lr)
        assert lr_decay >= 0, "Invalid learning rate decay: {}".format(lr_decay)
        assert eps >= 0.0, "Invalid epsilon value: {}".format(eps)
        assert weight_decay >= 0.0, "Invalid weight_decay value: {}".format(weight_decay)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay))
        self._disable_type_convert = True

    def _create_state(self, param_group: dict) -> None:
        for param in param_group["params"]:
            self._add_state(param, "square_avg")
            self._add_state(param, "step", initializer=0.0)

    def _updates(self, param_group: dict) -> None:
        weight_decay = param_group["weight_decay"]
        _lr, _lr_decay = hyper(param_group["lr"]), hyper(param_group["lr_decay"])
        _eps, c1, c2, c05 = (hyper(param_group["eps"]), scalar(1.0), scalar(2.0),
                             scalar(0.5))
        for param in param_group["params"]:
            if param.grad is None:
                continue
            states = self._state[param]
            step = states["step"]
            step += c1
            grad = param.grad
            if weight_decay != 0.0:
                grad = grad + param * hyper(weight_decay)
            square_avg = states["square_avg"]
            square_avg += grad ** c2
            delta = grad / (square_avg + _eps) ** c05
            param -= _lr / (c1 + (step - c1) * _lr_decay) * delta
