"""LAMB (You et al., "Large Batch Optimization for Deep Learning"): Adam's direction,
plus weight decay, rescaled per parameter by the trust ratio ||p|| / ||direction||.

MegEngine runs one fused kernel (LAMBUpdate); this composes the same float32 formula
from tensor ops. Two differences from real MegEngine 1.13, both fixes: its LAMB cannot
be constructed (the base class's `_add_state` rejects the `dtype` LAMB passes:
TypeError), and its CPU kernel sums ||p||^2 in an `int` accumulator (truncating every
partial sum); here ||p|| is the float norm, as in MegEngine's CUDA kernel.
"""
from __future__ import annotations

from typing import Iterable, Tuple, Union

import numpy as np

from .. import functional as F
from ..tensor import Parameter, Tensor
from ._adam_moments import check_adam_args
from .optimizer import Optimizer, hyper, scalar


class LAMB(Optimizer):
    """LAMB: betas (0.9, 0.999), eps 1e-8, bias_correction, weight_decay 0; the trust
    ratio applies when weight_decay > 0 (or always, with always_adapt)."""

    def __init__(self, params: Union[Iterable[Parameter], dict], lr: float,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 bias_correction: bool = True, weight_decay: float = 0.0,
                 always_adapt: bool = False):
        check_adam_args(lr, weight_decay, betas)
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, betas=betas, eps=eps))
        self.bias_correction = bias_correction
        self.always_adapt = always_adapt
        self._disable_type_convert = True

    def _create_state(self, param_group: dict) -> None:
        for param in param_group["params"]:
            self._add_state(param, "exp_avg")
            self._add_state(param, "exp_avg_sq")
            self._add_state(param, "step", initializer=0.0, dtype="float32")

    def _master(self, param: Parameter) -> Tensor:
        """The float32 tensor the update reads and writes."""
        return param

    def _updates(self, param_group: dict) -> None:
        for param in param_group["params"]:
            if param.grad is None:
                continue
            states = self._state[param]
            states["step"] += scalar(1.0)
            master = self._master(param)
            m, v, new = self._lamb_update(param_group, int(states["step"]),
                                          states["exp_avg"], states["exp_avg_sq"], master,
                                          param.grad.astype("float32"))
            states["exp_avg"]._reset(m)
            states["exp_avg_sq"]._reset(v)
            master._reset(new)
            if master is not param:
                param._reset(new.astype(param.dtype))

    def _lamb_update(self, group: dict, step: int, exp_avg: Tensor, exp_avg_sq: Tensor,
                     param: Tensor, grad: Tensor):
        """MegEngine's LAMBUpdate: (new exp_avg, new exp_avg_sq, new param)."""
        beta0, beta1 = (np.float32(b) for b in group["betas"])
        one = np.float32(1.0)
        weight_decay = np.float32(group["weight_decay"])
        m = hyper(beta0) * exp_avg + hyper(one - beta0) * grad
        v = hyper(beta1) * exp_avg_sq + hyper(one - beta1) * (grad * grad)
        bc0 = one - np.float32(float(beta0) ** step) if self.bias_correction else one
        bc1 = one - np.float32(float(beta1) ** step) if self.bias_correction else one
        direction = (m / hyper(bc0)) / (F.sqrt(v / hyper(bc1)) + hyper(group["eps"]))
        if weight_decay != 0:
            direction = direction + param * hyper(weight_decay)
        trust = scalar(1.0)
        if self.always_adapt or weight_decay > 0:
            p_norm = F.sqrt(F.sum(param * param))
            d_norm = F.sqrt(F.sum(direction * direction))
            if float(p_norm) > 0 and float(d_norm) > 0:
                trust = p_norm / d_norm
        new = param - (hyper(group["lr"]) * trust) * direction
        return m, v, new


class LAMBFp16(LAMB):
    """LAMB for float16 parameters: the update runs on a float32 master copy
    (state "param_fp32") and the parameter gets its float16 rounding."""

    def _create_state(self, param_group: dict) -> None:
        for param in param_group["params"]:
            self._add_state(param, "exp_avg", dtype="float32")
            self._add_state(param, "exp_avg_sq", dtype="float32")
            self._add_state(param, "step", initializer=0.0, dtype="float32")
            self._state[param]["param_fp32"] = param.astype("float32")

    def _master(self, param: Parameter) -> Tensor:
        return self._state[param]["param_fp32"]
