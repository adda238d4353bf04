"""`RNNCell` and `LSTMCell` with MegEngine 1.13's parameters, initialization and gate
order (LSTM gates i, f, g, o, checked against MegEngine), composed of linear maps and
elementwise ops so that they trace, compile and dump."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from .. import functional as F
from ..dispatch import apply
from ..ops.recurrent_layout import columns
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


class RNNBase(Module):
    """Multi-layer, optionally bidirectional recurrences over (seq, batch, feature) input
    (`batch_first`: (batch, seq, feature)), with MegEngine 1.13's parameters: one
    `_flatten_weights` Parameter of shape (gate_hidden, columns) is what forward reads,
    and the per-cell `cells[layer][direction]` modules MegEngine also keeps (initialized,
    in the state dict, unused by forward).

    `_flatten_weights` is a flat buffer read the way MegEngine's RNN/LSTM kernels read it:
    cell after cell (layer-major, then direction), each W_ih (gate_hidden, in),
    W_hh (gate_hidden, hidden), then with `bias` b_ih and b_hh (gate_hidden each).
    Direction 1 runs the sequence backwards; each layer's output is the directions'
    hidden states concatenated along features. Runs as one `rnn`/`lstm` op
    (megtrace/ops/recurrent.py), which dumps as MegEngine's RNNForward/LSTMForward as
    MegEngine does; in training with dropout between layers (which MegEngine's oprs
    never apply on CPU) it runs as one op per layer with dropout between them."""

    num_chunks = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0,
                 bidirectional: bool = False, proj_size: int = 0) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        self.proj_size = proj_size
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or \
                not 0 <= dropout <= 1:
            raise ValueError("Dropout should be a float in [0, 1], which indicates the "
                             "probability of an element to be zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        elif proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size > 0:
            raise NotImplementedError(
                f"{type(self).__name__}: proj_size > 0 is not supported (MegEngine 1.13's "
                "flattened weights hold no projection matrix either)")
        self.cells = [[self.create_cell(layer) for _ in range(self.num_directions)]
                      for layer in range(num_layers)]
        self._flatten_weights = Parameter(
            np.zeros((self.cells[0][0].gate_hidden_size, self._columns()), np.float32))
        self.reset_parameters()

    def _columns(self) -> int:
        return columns(self.input_size, self.hidden_size, self.num_layers,
                       self.num_directions, self.bias)

    def _layer_input_size(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.num_directions * self.hidden_size

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _check(self, input: Tensor, states) -> None:
        name = type(self).__name__
        if input.ndim != 3:
            raise ValueError(f"{name}: input must be 3-d (seq_len, batch, input_size) "
                             f"(batch_first: batch, seq_len, input_size); got shape "
                             f"{tuple(input.shape)}")
        if input.shape[2] != self.input_size:
            raise ValueError(f"{name}: input has {input.shape[2]} features, expected "
                             f"input_size={self.input_size}")
        want = (self.num_directions * self.num_layers, input.shape[1], self.hidden_size)
        for s in states:
            if tuple(s.shape) != want:
                raise ValueError(f"{name}: hidden state must have shape {want} "
                                 f"(num_directions * num_layers, batch, hidden_size); got "
                                 f"{tuple(s.shape)}")

    def forward(self, input: Tensor, hx=None):
        if self.batch_first:
            input = input.transpose((1, 0, 2))          # [seq_len, batch, feature]
        states = self.init_hidden(input.shape[1], input.dtype) if hx is None else \
            (hx if isinstance(hx, tuple) else (hx,))
        self._check(input, states)
        if self.training and self.dropout > 0 and self.num_layers > 1:
            output, final = self._layer_by_layer(input, states)
        else:
            output, *final = apply(self._op_name, input, *states, self._flatten_weights,
                                   **self._op_params())
        if self.batch_first:
            output = output.transpose((1, 0, 2))
        return output, self._pack_hidden(final)

    def _op_params(self) -> dict:
        return {"num_layers": self.num_layers, "bidirectional": self.bidirectional,
                "bias": self.bias, "hidden_size": self.hidden_size}

    def _layer_by_layer(self, input: Tensor, states):
        """The op once per layer, with dropout between layers (training only; MegEngine's
        CPU oprs never apply it): a layer's cells are one contiguous run of the flat
        buffer, so its slice is the buffer of a one-layer op."""
        gate = self.cells[0][0].gate_hidden_size
        flat = self._flatten_weights.reshape(-1)
        dirs, start = self.num_directions, 0
        x, finals = input, [[] for _ in states]
        for layer in range(self.num_layers):
            size = gate * columns(self._layer_input_size(layer), self.hidden_size, 1, dirs,
                                  self.bias)
            weights = flat[start:start + size].reshape(gate, -1)
            start += size
            cells = [s[layer * dirs:(layer + 1) * dirs] for s in states]
            x, *final = apply(self._op_name, x, *cells, weights,
                              **{**self._op_params(), "num_layers": 1})
            for k, f in enumerate(final):
                finals[k].append(f)
            if layer + 1 < self.num_layers:
                x = F.nn.dropout(x, self.dropout)
        return x, [F.concat(f, axis=0) for f in finals]


class RNN(RNNBase):
    """MegEngine 1.13's multi-layer Elman RNN (tanh or relu): returns (output, h_n);
    output (seq_len, batch, D * hidden) (batch_first: batch first), h_n
    (D * num_layers, batch, hidden). See RNNBase for the weight layout."""

    def __init__(self, *args, **kwargs) -> None:
        self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu'; got "
                             f"{self.nonlinearity!r}")
        super().__init__(*args, **kwargs)

    _op_name = "rnn"

    def _op_params(self) -> dict:
        return {**super()._op_params(), "nonlinearity": self.nonlinearity}

    def create_cell(self, layer: int) -> RNNCell:
        return RNNCell(self._layer_input_size(layer), self.hidden_size, self.bias,
                       self.nonlinearity)

    def init_hidden(self, batch_size: int, dtype="float32"):
        return (F.zeros((self.num_directions * self.num_layers, batch_size,
                         self.hidden_size), dtype=dtype),)

    def _pack_hidden(self, final):
        return final[0]


class LSTM(RNNBase):
    """MegEngine 1.13's multi-layer LSTM: returns (output, (h_n, c_n)); gates i, f, g, o
    along the 4 * hidden axis of each cell's weights. See RNNBase for the weight
    layout."""

    _op_name = "lstm"

    def create_cell(self, layer: int) -> LSTMCell:
        return LSTMCell(self._layer_input_size(layer), self.hidden_size, self.bias)

    def init_hidden(self, batch_size: int, dtype="float32"):
        shape = (self.num_directions * self.num_layers, batch_size, self.hidden_size)
        return (F.zeros(shape, dtype=dtype), F.zeros(shape, dtype=dtype))

    def _pack_hidden(self, final):
        return final[0], final[1]
