"""`rnn` and `lstm`: whole multi-layer recurrences, as MegEngine 1.13's RNNForward and
LSTMForward oprs compute them, so that a real MegEngine dump of M.RNN / M.LSTM (which
writes those oprs) loads, and megtrace writes M.RNN / M.LSTM as MegEngine does.

Inputs are MegEngine's: x (seq_len, batch, input), the initial states (D * num_layers,
batch, hidden) (hx; LSTM also cx) and `flatten_weights`, a (gate_hidden, columns) buffer
read as one flat run of cells (layer-major, then direction): W_ih (gate_hidden, in),
W_hh (gate_hidden, hidden), then with `bias` b_ih and b_hh (gate_hidden each); a layer
after the first takes D * hidden features. Direction 1 runs the sequence backwards; a
layer's output concatenates the directions' hidden states. LSTM gates are i, f, g, o
along gate_hidden. Results: (output, h_n) and (output, h_n, c_n).

MegEngine's oprs have one more output, the reserve space of the training kernels, which
nothing reads in an inference graph; `dropout` is a param of the oprs that MegEngine's
CPU kernels never apply (dnn/src/naive/rnn), so neither does this op, and the module
(megtrace/module/rnn.py) uses the op only where no dropout applies.

The Relax lowering unrolls the sequence (its length is static); a compiled graph passes
the op through optimize_for_inference as an opaque call. The VJP (recurrent_vjp.py) is
backpropagation through time in Tensor ops.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from .recurrent_layout import cell_pieces, columns
from .recurrent_vjp import recurrent_vjp
from .registry import MgeOpr, OpDef, register

_GATES = {"rnn": 1, "lstm": 4}


# -- shapes -----------------------------------------------------------------------------
def _check(name: str, x, states, w, num_layers, bidirectional, bias, hidden_size):
    for t in (x, *states, w):
        if t.dtype != "float32":
            raise DTypeError(f"{name}: inputs must be float32; got {t}")
    if x.ndim != 3:
        raise ShapeError(f"{name}: input must be 3-d (seq_len, batch, input_size); got {x}")
    dirs = 2 if bidirectional else 1
    want = (dirs * num_layers, x.shape[1], hidden_size)
    for s in states:
        if s.shape != want:
            raise ShapeError(f"{name}: states must be {want} (D * num_layers, batch, "
                             f"hidden_size); got {s}")
    gate = _GATES[name] * hidden_size
    cols = columns(x.shape[2], hidden_size, num_layers, dirs, bias)
    if w.shape != (gate, cols):
        raise ShapeError(f"{name}: flatten_weights must be ({gate}, {cols}) for input "
                         f"{x.shape[2]}, hidden {hidden_size}, {num_layers} layer(s), "
                         f"bidirectional={bidirectional}, bias={bias}; got {w}")
    out = TensorType((x.shape[0], x.shape[1], dirs * hidden_size), "float32")
    return (out,) + tuple(TensorType(want, "float32") for _ in states)


def _rnn_infer(x, hx, w, *, num_layers, bidirectional, bias, hidden_size, nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"rnn: nonlinearity must be 'tanh' or 'relu'; got {nonlinearity!r}")
    return _check("rnn", x, (hx,), w, num_layers, bidirectional, bias, hidden_size)


def _lstm_infer(x, hx, cx, w, *, num_layers, bidirectional, bias, hidden_size):
    return _check("lstm", x, (hx, cx), w, num_layers, bidirectional, bias, hidden_size)


# -- the recurrence, once for NumPy and once for Relax ---------------------------------------
def _recurrence(ops, x, states, w, step, *, num_layers, bidirectional, bias, hidden_size,
                gates, input_size, seq_len):
    """Every layer and direction with the array functions in `ops` (NumPy or Relax);
    returns (output, final states)."""
    dirs = 2 if bidirectional else 1
    cells = cell_pieces(input_size, hidden_size, num_layers, dirs, bias, gates * hidden_size)
    flat = ops.flat(w)
    finals = [[] for _ in states]
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            idx = layer * dirs + d
            w_ih, w_hh, b_ih, b_hh = (None if p is None else ops.piece(flat, *p)
                                      for p in cells[idx])
            proj = ops.matmul_t(x, w_ih)
            if b_ih is not None:
                proj = ops.add(proj, b_ih)
            state = [ops.index(s, idx) for s in states]
            steps = [None] * seq_len
            for t in (range(seq_len) if d == 0 else range(seq_len - 1, -1, -1)):
                g = ops.add(ops.index(proj, t), ops.matmul_t(state[0], w_hh))
                if b_hh is not None:
                    g = ops.add(g, b_hh)
                state = step(ops, g, state)
                steps[t] = state[0]
            outs.append(ops.stack(steps))
            for k, s in enumerate(state):
                finals[k].append(s)
        x = outs[0] if dirs == 1 else ops.concat(outs, 2)
    return [x] + [ops.stack(f) for f in finals]


def _rnn_step(nonlinearity: str) -> Callable:
    def step(ops, g, state):
        return [ops.tanh(g) if nonlinearity == "tanh" else ops.relu(g)]
    return step


def _lstm_step(ops, g, state):
    i, f, c_in, o = ops.split4(g)
    c = ops.add(ops.mul(ops.sigmoid(f), state[1]), ops.mul(ops.sigmoid(i), ops.tanh(c_in)))
    return [ops.mul(ops.sigmoid(o), ops.tanh(c)), c]


class _NumPy:
    """Array functions of the recurrence in NumPy (float32 throughout)."""
    flat = staticmethod(lambda w: w.reshape(-1))
    piece = staticmethod(lambda flat, at, shape, n: flat[at:at + n].reshape(shape))
    matmul_t = staticmethod(lambda a, b: np.matmul(a, b.T))
    add = staticmethod(np.add)
    mul = staticmethod(np.multiply)
    index = staticmethod(lambda a, i: a[i])
    stack = staticmethod(lambda items: np.stack(items, axis=0))
    concat = staticmethod(lambda items, axis: np.concatenate(items, axis=axis))
    tanh = staticmethod(np.tanh)
    relu = staticmethod(lambda a: np.maximum(a, np.float32(0)))
    sigmoid = staticmethod(lambda a: (0.5 * (1.0 + np.tanh(0.5 * a.astype(np.float64))))
                           .astype(a.dtype))     # no overflow for large negative a
    split4 = staticmethod(lambda a: np.split(a, 4, axis=-1))


class _Relax:
    """The same functions building Relax expressions, each bound to a var (the unrolled
    steps reuse every intermediate)."""

    def __init__(self, L):
        self.R, self.emit = L.R, (L.bb.emit if L.bb is not None else (lambda e: e))

    def flat(self, w):
        return self.emit(self.R.reshape(w, (-1,)))

    def piece(self, flat, at, shape, n):
        part = self.R.strided_slice(flat, axes=[0], begin=[at], end=[at + n])
        return self.emit(self.R.reshape(part, shape))

    def matmul_t(self, a, b):
        return self.emit(self.R.matmul(a, self.R.permute_dims(b, [1, 0])))

    def add(self, a, b):
        return self.emit(self.R.add(a, b))

    def mul(self, a, b):
        return self.emit(self.R.multiply(a, b))

    def index(self, a, i):
        return self.emit(self.R.squeeze(
            self.R.strided_slice(a, axes=[0], begin=[i], end=[i + 1]), axis=[0]))

    def stack(self, items):
        return self.emit(self.R.concat([self.R.expand_dims(a, 0) for a in items], axis=0))

    def concat(self, items, axis):
        return self.emit(self.R.concat(items, axis=axis))

    def tanh(self, a):
        return self.emit(self.R.tanh(a))

    def relu(self, a):
        return self.emit(self.R.nn.relu(a))

    def sigmoid(self, a):
        return self.emit(self.R.sigmoid(a))

    def split4(self, a):
        parts = self.emit(self.R.split(a, 4, axis=-1))
        return [self.emit(parts[k]) for k in range(4)]


def _run(ops, step, gates, x_shape, x, states, w, params):
    return _recurrence(ops, x, states, w, step, gates=gates, input_size=x_shape[2],
                       seq_len=x_shape[0], **params)


def _rnn_np(x, hx, w, *, nonlinearity, **p):
    return tuple(_run(_NumPy, _rnn_step(nonlinearity), 1, x.shape, x, [hx], w, p))


def _lstm_np(x, hx, cx, w, **p):
    return tuple(_run(_NumPy, _lstm_step, 4, x.shape, x, [hx, cx], w, p))


def _rnn_rx(L, x, hx, w, *, nonlinearity, **p):
    return _run(_Relax(L), _rnn_step(nonlinearity), 1, L.types[0].shape, x, [hx], w, p)


def _lstm_rx(L, x, hx, cx, w, **p):
    return _run(_Relax(L), _lstm_step, 4, L.types[0].shape, x, [hx, cx], w, p)


# -- MegEngine's RNNForward / LSTMForward ---------------------------------------------------
def _common_fields(p: dict) -> dict:
    return {"num_layers": p["num_layers"], "bidirectional": p["bidirectional"],
            "bias": p["bias"], "hidden_size": p["hidden_size"], "dropout": 0.0,
            "fwd_mode": "INFERENCE"}


def _common_decode(f: dict) -> dict:
    return {"num_layers": int(f["num_layers"]), "bidirectional": bool(f["bidirectional"]),
            "bias": bool(f["bias"]), "hidden_size": int(f["hidden_size"])}


def _rnn_decode(f: dict) -> dict:
    mode = f["nonlineMode"]
    if mode not in ("TANH", "RELU"):
        raise ShapeError(f"RNNForward: nonlineMode {mode} is not one MegEngine's RNN "
                         "computes (TANH or RELU)")
    return {**_common_decode(f), "nonlinearity": mode.lower()}


def _lstm_decode(f: dict) -> dict:
    if f.get("proj_size", 0):
        raise ShapeError(f"LSTMForward: proj_size={f['proj_size']} is not supported "
                         "(MegEngine 1.13's kernels have no projection either)")
    return _common_decode(f)


_PARAMS = {"num_layers": 1, "bidirectional": False, "bias": True, "hidden_size": 1}

register(OpDef(
    "rnn", eager=_rnn_np, infer=_rnn_infer, lower=_rnn_rx,
    params={**_PARAMS, "nonlinearity": "tanh"}, opaque_in_optimize=True,
    mge=MgeOpr("RNNForward", "RNN", outputs=3, results=(0, 1),
               fields=lambda p: {**_common_fields(p),
                                 "nonlineMode": p["nonlinearity"].upper()},
               decode=_rnn_decode),
    vjp=lambda V, i, o, g, **p: recurrent_vjp(V, i, o, g, lstm=False, **p)))
register(OpDef(
    "lstm", eager=_lstm_np, infer=_lstm_infer, lower=_lstm_rx, params=dict(_PARAMS),
    opaque_in_optimize=True,
    mge=MgeOpr("LSTMForward", "LSTM", outputs=4, results=(0, 1, 2),
               fields=lambda p: {**_common_fields(p), "proj_size": 0},
               decode=_lstm_decode),
    vjp=lambda V, i, o, g, **p: recurrent_vjp(V, i, o, g, lstm=True, **p)))
