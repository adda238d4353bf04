"""SGD with optional (Nesterov) momentum and L2 weight decay, as MegEngine updates it:
v = momentum * v + g;  p -= lr * (g + momentum * v if nesterov else v)."""
from __future__ import annotations

from typing import Iterable, Union

from ..tensor import Parameter
from .optimizer import Optimizer, hyper, inplace_add_, inplace_update_mode, scalar


class SGD(Optimizer):
    """Stochastic gradient descent (momentum, nesterov, weight_decay default off)."""

    def __init__(self, params: Union[Iterable[Parameter], dict], lr: float,
                 momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0):
        assert lr >= 0.0, "Invalid learning rate: {}".format(lr)
        assert momentum >= 0.0, "Invalid momentum value: {}".format(momentum)
        assert weight_decay >= 0.0, "Invalid weight_decay value: {}".format(weight_decay)
        assert not nesterov or momentum > 0.0, "Nesterov momentum requires a momentum"
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))
        self.nesterov = nesterov
        self._disable_type_convert = True

    def _create_state(self, param_group: dict) -> None:
        if param_group["momentum"] != 0.0:
            for param in param_group["params"]:
                self._add_state(param, "momentum_buffer")

    def _updates(self, param_group: dict) -> None:
        lr, momentum = param_group["lr"], param_group["momentum"]
        weight_decay = param_group["weight_decay"]
        _lr, _momentum, _weight_decay = hyper(lr), hyper(momentum), hyper(weight_decay)
        fused = inplace_update_mode()
        for param in param_group["params"]:
            if param.grad is None:
                continue
            grad = param.grad
            if weight_decay != 0.0:
                grad = grad + param * _weight_decay
            if momentum != 0.0:
                buf = self._state[param]["momentum_buffer"]
                if fused:
                    inplace_add_(buf, grad, _momentum, scalar(1.0))
                else:
                    buf *= _momentum
                    buf += grad
                grad = grad + buf * _momentum if self.nesterov else buf
            if fused:
                inplace_add_(param, grad, scalar(1.0), hyper(-lr))
            else:
                param -= _lr * grad
