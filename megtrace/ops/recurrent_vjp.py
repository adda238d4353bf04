"""Backpropagation through time for the `rnn` and `lstm` ops (megtrace/ops/recurrent.py),
in Tensor operations only (so a traced backward compiles like the forward).

The forward is recomputed step by step to get each step's previous state and gate
activations, then each layer is walked back from the last, each direction against its
own time order: the hidden-state gradient of a step is what the output and the next
step send it; the pre-activation gradients of all steps give the weight and bias
gradients as two matrix products per cell, and the layer input's gradient as one.
"""
from __future__ import annotations

from .recurrent_layout import cell_weights


def _forward_records(V, x, states, pieces, p, lstm: bool, act):
    """Recompute the recurrence; per layer its input, per cell the steps in the order run:
    (t, h_prev, c_prev, activations, c_new) for LSTM, (t, h_prev, h_new) for RNN."""
    F = V.F
    dirs = 2 if p["bidirectional"] else 1
    seq = x.shape[0]
    layer_inputs, records = [], {}
    for layer in range(p["num_layers"]):
        layer_inputs.append(x)
        outs = []
        for d in range(dirs):
            idx = layer * dirs + d
            w_ih, w_hh, b_ih, b_hh = pieces[idx]
            proj = F.matmul(x, w_ih, transpose_b=True)
            if b_ih is not None:
                proj = proj + b_ih
            h = states[0][idx]
            c = states[1][idx] if lstm else None
            steps, rec = [None] * seq, []
            for t in (range(seq) if d == 0 else range(seq - 1, -1, -1)):
                a = proj[t] + F.matmul(h, w_hh, transpose_b=True)
                if b_hh is not None:
                    a = a + b_hh
                if lstm:
                    i, f, g, o = F.split(a, 4, axis=1)
                    i, f, g, o = F.sigmoid(i), F.sigmoid(f), F.tanh(g), F.sigmoid(o)
                    c_new = f * c + i * g
                    rec.append((t, h, c, (i, f, g, o), c_new))
                    h, c = o * F.tanh(c_new), c_new
                else:
                    h_new = act(a)
                    rec.append((t, h, h_new))
                    h = h_new
                steps[t] = h
            outs.append(F.stack(steps, axis=0))
            records[idx] = rec
        x = outs[0] if dirs == 1 else F.concat(outs, axis=2)
    return layer_inputs, records


def _cell_backward(V, rec, gy_dir, dh, dc, w_hh, lstm: bool, nonlinearity: str):
    """Walk one cell's steps back; returns (pre-activation grads by t, dh0, dc0)."""
    F = V.F
    das = {}
    for step in reversed(rec):
        t = step[0]
        dh = dh + gy_dir[t]
        if lstm:
            _, _, c_prev, (i, f, g, o), c_new = step
            tc = F.tanh(c_new)
            dc = dc + dh * o * (1 - tc * tc)
            da = F.concat([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                           dc * i * (1 - g * g), dh * tc * o * (1 - o)], axis=1)
            dc = dc * f
        else:
            h_new = step[2]
            da = dh * (1 - h_new * h_new) if nonlinearity == "tanh" else \
                V.select(h_new > 0, dh)
        das[t] = da
        dh = F.matmul(da, w_hh)
    return das, dh, dc


def recurrent_vjp(V, inputs, outputs, grads, *, lstm: bool, num_layers, bidirectional,
                  bias, hidden_size, nonlinearity="tanh"):
    F = V.F
    p = {"num_layers": num_layers, "bidirectional": bidirectional}
    x, states, w = inputs[0], list(inputs[1:-1]), inputs[-1]
    seq, batch, inp = x.shape
    dirs, hid = (2 if bidirectional else 1), hidden_size
    gate = (4 if lstm else 1) * hid
    pieces = cell_weights(w, inp, hid, num_layers, dirs, bias, gate)
    act = F.tanh if nonlinearity == "tanh" else F.relu
    layer_inputs, records = _forward_records(V, x, states, pieces, p, lstm, act)

    gy = grads[0] if grads[0] is not None else V.zeros_like(outputs[0])
    final_grads = [g if g is not None else V.zeros_like(o) for g, o in zip(grads[1:], outputs[1:])]
    d_states = [[None] * (num_layers * dirs) for _ in states]
    d_pieces = {}
    for layer in reversed(range(num_layers)):
        xin = layer_inputs[layer]
        width = xin.shape[2]
        dx_in = None
        for d in range(dirs):
            idx = layer * dirs + d
            w_ih, w_hh = pieces[idx][0], pieces[idx][1]
            das, dh, dc = _cell_backward(
                V, records[idx], gy[:, :, d * hid:(d + 1) * hid], final_grads[0][idx],
                final_grads[1][idx] if lstm else None, w_hh, lstm, nonlinearity)
            d_states[0][idx] = dh
            if lstm:
                d_states[1][idx] = dc
            da = F.stack([das[t] for t in range(seq)], axis=0)          # (L, N, G)
            h_prev = F.stack([s[1] for s in sorted(records[idx], key=lambda s: s[0])], axis=0)
            da2 = da.reshape(seq * batch, gate)
            d_w_ih = F.matmul(da2, xin.reshape(seq * batch, width), transpose_a=True)
            d_w_hh = F.matmul(da2, h_prev.reshape(seq * batch, hid), transpose_a=True)
            d_pieces[idx] = [d_w_ih, d_w_hh]
            if bias:
                db = F.sum(da2, axis=0)
                d_pieces[idx] += [db, db]
            part = F.matmul(da, w_ih)
            dx_in = part if dx_in is None else dx_in + part
        gy = dx_in
    dw = F.concat([g.reshape(-1) for idx in range(num_layers * dirs) for g in d_pieces[idx]],
                  axis=0).reshape(tuple(w.shape))
    return (gy, *[F.stack(s, axis=0) for s in d_states], dw)
