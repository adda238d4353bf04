"""`RNNCell` and `LSTMCell` with MegEngine 1.13's parameters, initialization and gate
order (LSTM gates i, f, g, o, checked against MegEngine), composed of linear maps and
elementwise ops so that they trace, compile and dump."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from .. import functional as F
from ..tensor import Parameter, Tensor
from . import init
from .module import Module


class RNNCellBase(Module):
    """Weights (num_chunks * hidden, input) / (num_chunks * hidden, hidden); without bias
    the biases are zero buffers, as in MegEngine."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.gate_hidden_size = num_chunks * hidden_size
        g = self.gate_hidden_size
        self.weight_ih = Parameter(np.zeros((g, input_size), np.float32))
        self.weight_hh = Parameter(np.zeros((g, hidden_size), np.float32))
        make = Parameter if bias else Tensor
        self.bias_ih = make(np.zeros(g, np.float32))
        self.bias_hh = make(np.zeros(g, np.float32))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _gates(self, inp, h):
        return F.add(F.linear(inp, self.weight_ih, self.bias_ih),
                     F.linear(h, self.weight_hh, self.bias_hh))

    def _zeros(self, inp):
        return Tensor(np.zeros((inp.shape[0], self.hidden_size), inp.dtype))


class RNNCell(RNNCellBase):
    """h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh); "tanh" or "relu"."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh"):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu'; got "
                             f"{nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, num_chunks=1)

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        h = self._zeros(input) if hx is None else hx
        gates = self._gates(input, h)
        return F.tanh(gates) if self.nonlinearity == "tanh" else F.relu(gates)


class LSTMCell(RNNCellBase):
    """Returns (h', c'): c' = f*c + i*g, h' = o*tanh(c'), gates (i, f, g, o) in that
    order along the 4*hidden axis."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__(input_size, hidden_size, bias, num_chunks=4)

    def forward(self, input: Tensor,
                hx: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Tensor, Tensor]:
        h, c = (self._zeros(input), self._zeros(input)) if hx is None else hx
        i, f, g, o = F.split(self._gates(input, h), 4, axis=1)
        c_next = F.add(F.mul(F.sigmoid(f), c), F.mul(F.sigmoid(i), F.tanh(g)))
        return F.mul(F.sigmoid(o), F.tanh(c_next)), c_next
