"""The moment updates Adam and AdamW share (MegEngine computes them identically)."""
from __future__ import annotations

from ..tensor import Tensor
from .optimizer import hyper, inplace_add_, scalar


def adam_direction(states: dict, grad: Tensor, beta0: float, beta1: float, eps: float,
                   fused: bool) -> Tensor:
    """Advance step and both moments in place; the bias-corrected update direction
    m_hat / (sqrt(v_hat) + eps)."""
    step, exp_avg, exp_avg_sq = states["step"], states["exp_avg"], states["exp_avg_sq"]
    _beta0, _beta1, _eps = hyper(beta0), hyper(beta1), hyper(eps)
    c1, c05 = scalar(1.0), scalar(0.5)
    if fused:
        inplace_add_(step, c1, c1, c1)
        inplace_add_(exp_avg, grad, _beta0, hyper(1 - beta0))
        inplace_add_(exp_avg_sq, grad * grad, _beta1, hyper(1 - beta1))
    else:
        step += c1
        exp_avg *= _beta0
        exp_avg += grad * (c1 - _beta0)
        exp_avg_sq *= _beta1
        exp_avg_sq += (c1 - _beta1) * (grad * grad)
    return (exp_avg / (c1 - _beta0 ** step)) / (
        (exp_avg_sq / (c1 - _beta1 ** step)) ** c05 + _eps)


def add_adam_state(optimizer, param_group: dict) -> None:
    """The slots Adam and AdamW keep per parameter: both moments and the step count."""
    for param in param_group["params"]:
        optimizer._add_state(param, "exp_avg")
        optimizer._add_state(param, "exp_avg_sq")
        optimizer._add_state(param, "step", initializer=0.0)


def check_adam_args(lr: float, weight_decay: float, betas) -> None:
    if lr < 0.0:
        raise ValueError("Invalid learning rate: {}".format(lr))
    if weight_decay < 0.0:
        raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
