"""Samples for rnn and lstm (MegEngine 1.13's RNNForward / LSTMForward). The reference
walks the flat weight buffer cell by cell and each batch row step by step in float64,
with the cell equations written out (tanh/relu RNN; LSTM gates i, f, g, o)."""
from __future__ import annotations

import numpy as np

from .samples import Sample, f32


def _reference(x, states, w, *, hidden_size, cell, num_layers=1, bidirectional=False,
               bias=True):
    x, w = x.astype(np.float64), w.reshape(-1).astype(np.float64)
    states = [s.astype(np.float64) for s in states]
    dirs, hid = (2 if bidirectional else 1), hidden_size
    pos = 0

    def take(rows, cols):
        nonlocal pos
        block = w[pos:pos + rows * cols].reshape(rows, cols) if cols else \
            w[pos:pos + rows]
        pos += rows * (cols or 1)
        return block
    seq, batch = x.shape[:2]
    finals = [np.zeros_like(s) for s in states]
    layer_in = x
    for layer in range(num_layers):
        out = np.zeros((seq, batch, dirs * hid))
        for d in range(dirs):
            rows = hid * (4 if cell == "lstm" else 1)
            w_ih, w_hh = take(rows, layer_in.shape[2]), take(rows, hid)
            b_ih, b_hh = (take(rows, 0), take(rows, 0)) if bias else (0.0, 0.0)
            k = layer * dirs + d
            for b in range(batch):
                h = states[0][k, b].copy()
                c = states[1][k, b].copy() if cell == "lstm" else None
                times = range(seq) if d == 0 else reversed(range(seq))
                for t in times:
                    a = w_ih @ layer_in[t, b] + b_ih + w_hh @ h + b_hh
                    if cell == "lstm":
                        sig = lambda v: 1 / (1 + np.exp(-v))       # noqa: E731
                        i, f, g, o = a[:hid], a[hid:2 * hid], a[2 * hid:3 * hid], a[3 * hid:]
                        c = sig(f) * c + sig(i) * np.tanh(g)
                        h = sig(o) * np.tanh(c)
                    else:
                        h = np.tanh(a) if cell == "tanh" else np.maximum(a, 0)
                    out[t, b, d * hid:(d + 1) * hid] = h
                finals[0][k, b] = h
                if cell == "lstm":
                    finals[1][k, b] = c
        layer_in = out
    return (layer_in, *finals)


def _rnn_ref(x, hx, w, *, nonlinearity="tanh", **p):
    return _reference(x, [hx], w, cell=nonlinearity, **p)


def _lstm_ref(x, hx, cx, w, **p):
    return _reference(x, [hx, cx], w, cell="lstm", **p)


def _inputs(seq, batch, inp, hid, layers, dirs, bias, gates, n_states):
    cols = dirs * (inp + hid) + (layers - 1) * dirs * (dirs * hid + hid) + \
        (2 * dirs * layers if bias else 0)
    state = f32(dirs * layers, batch, hid)
    return lambda rng: [f32(seq, batch, inp)(rng)] + [state(rng) for _ in range(n_states)] + \
        [f32(gates * hid, cols, lo=-0.6, hi=0.6)(rng)]


SAMPLES = [
    Sample("rnn", _inputs(4, 2, 3, 5, 1, 1, True, 1, 1), {"hidden_size": 5}, _rnn_ref),
    Sample("rnn", _inputs(3, 2, 3, 4, 2, 2, False, 1, 1),
           {"hidden_size": 4, "num_layers": 2, "bidirectional": True, "bias": False,
            "nonlinearity": "relu"}, _rnn_ref, tag="relu-2l-bi-nobias"),
    Sample("lstm", _inputs(4, 2, 3, 5, 1, 1, True, 4, 2), {"hidden_size": 5}, _lstm_ref),
    Sample("lstm", _inputs(3, 2, 3, 4, 2, 2, True, 4, 2),
           {"hidden_size": 4, "num_layers": 2, "bidirectional": True}, _lstm_ref,
           tag="2l-bi"),
]

BAD = [
    ("rnn", [(4, 2, 3), (1, 2, 3), (4, 9)], {"hidden_size": 4}, "ShapeError", "states"),
    ("lstm", [(4, 2, 3), (1, 2, 4), (1, 2, 4), (16, 8)], {"hidden_size": 4}, "ShapeError",
     "flatten_weights"),
]
