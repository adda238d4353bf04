"""`BatchMatMulActivation`: one weight matrix per batch entry, weight @ x + bias, then an
optional ReLU (MegEngine's module; no transposes)."""
from __future__ import annotations

import numpy as np

from ..functional import matmul, relu
from ..tensor import Parameter
from . import init
from .module import Module


class BatchMatMulActivation(Module):
    """weight (batch, out_features, in_features) @ x (batch, in_features, k) + bias
    (out_features,), then ReLU when `nonlinear_mode` is "relu"."""

    def __init__(self, batch: int, in_features: int, out_features: int, bias: bool = True,
                 nonlinear_mode: str = "identity", **kwargs):
        super().__init__(**kwargs)
        self.batch, self.in_features, self.out_features = batch, in_features, out_features
        self.weight = Parameter(np.zeros((batch, out_features, in_features), np.float32))
        self.bias = Parameter(np.zeros((out_features,), np.float32)) if bias else None
        self.nonlinear_mode = nonlinear_mode.lower()
        if self.nonlinear_mode not in ("identity", "relu"):
            raise ValueError(f"BatchMatMulActivation: nonlinear_mode must be 'identity' or "
                             f"'relu'; got {nonlinear_mode!r}")
        self.reset_parameters()

    def _get_fanin(self) -> int:
        return self.in_features

    def reset_parameters(self) -> None:
        init.normal_(self.weight, 0.0, np.sqrt(1 / self._get_fanin()))
        if self.bias is not None:
            init.zeros_(self.bias)

    def _calc_linear(self, x, weight, bias):
        res = matmul(weight, x)
        if bias is not None:       # broadcast on the last axis, as MegEngine adds it
            res = res + bias
        return relu(res) if self.nonlinear_mode == "relu" else res

    def forward(self, x):
        return self._calc_linear(x, self.weight, self.bias)

    def _module_info_string(self) -> str:
        return "batch={}, in_features={}, out_features={}, bias={}".format(
            self.batch, self.in_features, self.out_features, self.bias is not None)
