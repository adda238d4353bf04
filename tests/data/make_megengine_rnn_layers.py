"""Golden M.RNN / M.LSTM outputs from MegEngine 1.13 on CPU (run in the megref chroot:
cd tests/data && /work/shared/megref/mpy make_megengine_rnn_layers.py). Writes
megengine_rnn_layers.npz: per config, `_flatten_weights`, the input, the initial
states and the outputs (eval mode, so dropout is off)."""
import os

import numpy as np

import megengine as mge
import megengine.module as M

CONFIGS = {
    # name: (class, args, kwargs, input shape, give initial states)
    "rnn_tanh": (M.RNN, (3, 4), {}, (5, 2, 3), True),
    "rnn_relu_2l_bi": (M.RNN, (3, 4, 2), {"nonlinearity": "relu", "bidirectional": True},
                       (5, 2, 3), True),
    "rnn_nobias_bf": (M.RNN, (3, 4, 2), {"bias": False, "batch_first": True}, (2, 5, 3),
                      False),
    "lstm": (M.LSTM, (3, 4), {}, (5, 2, 3), True),
    "lstm_2l_bi": (M.LSTM, (3, 4, 2), {"bidirectional": True}, (6, 2, 3), True),
    "lstm_3l_bi_bf_nobias": (M.LSTM, (3, 5, 3), {"bidirectional": True, "batch_first": True,
                                                  "bias": False}, (2, 4, 3), False),
}

np.random.seed(23)
out = {}
for name, (cls, args, kwargs, shape, with_states) in CONFIGS.items():
    m = cls(*args, **kwargs)
    m.eval()
    x = np.random.randn(*shape).astype("float32")
    out[f"{name}.weights"] = m._flatten_weights.numpy()
    out[f"{name}.x"] = x
    batch = shape[0] if kwargs.get("batch_first") else shape[1]
    state_shape = (m.num_directions * m.num_layers, batch, m.hidden_size)
    if cls is M.LSTM:
        if with_states:
            h0 = np.random.randn(*state_shape).astype("float32")
            c0 = np.random.randn(*state_shape).astype("float32")
            out[f"{name}.h0"], out[f"{name}.c0"] = h0, c0
            y, (h, c) = m(mge.tensor(x), (mge.tensor(h0), mge.tensor(c0)))
        else:
            y, (h, c) = m(mge.tensor(x))
        out[f"{name}.c"] = c.numpy()
    else:
        if with_states:
            h0 = np.random.randn(*state_shape).astype("float32")
            out[f"{name}.h0"] = h0
            y, h = m(mge.tensor(x), mge.tensor(h0))
        else:
            y, h = m(mge.tensor(x))
    out[f"{name}.y"], out[f"{name}.h"] = y.numpy(), h.numpy()
np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "megengine_rnn_layers.npz"), **out)
print("wrote", len(out), "arrays")
