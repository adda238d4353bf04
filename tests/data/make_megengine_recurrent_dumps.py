"""Golden data: MegEngine 1.13's dumps of traced M.RNN / M.LSTM models, which it writes as
its own RNNForward / LSTMForward oprs (run in the megref chroot:
MEGREF_BIND=<repo> /work/shared/megref/mpy tests/data/make_megengine_recurrent_dumps.py).
Writes megengine_recurrent/<name>.mge and megengine_recurrent/io.npz (per model: the
inputs `<name>.x<i>` and MegEngine's outputs `<name>.y<i>`, from the traced run).
tests/modelfile/test_recurrent_dumps.py loads the files with megtrace and compares."""
import os

import numpy as np

import megengine as mge
import megengine.module as M
from megengine.jit import trace

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_recurrent")

# name: (class, args, kwargs, input shape, give initial states)
CONFIGS = {
    "rnn_tanh": (M.RNN, (3, 4), {}, (5, 2, 3), True),
    "rnn_relu_2l_bi": (M.RNN, (3, 4, 2), {"nonlinearity": "relu", "bidirectional": True},
                       (5, 2, 3), False),
    "rnn_nobias_bf": (M.RNN, (3, 4, 2), {"bias": False, "batch_first": True}, (2, 5, 3),
                      True),
    "lstm": (M.LSTM, (3, 4), {}, (5, 2, 3), True),
    "lstm_2l_bi": (M.LSTM, (3, 4, 2), {"bidirectional": True}, (6, 2, 3), False),
    "lstm_3l_bi_bf_nobias": (M.LSTM, (3, 5, 3), {"bidirectional": True, "batch_first": True,
                                                  "bias": False}, (2, 4, 3), True),
}


def model_fn(m, is_lstm, with_states):
    """The traced function: every output a tensor (MegEngine's dump wants a flat list)."""
    if is_lstm:
        if with_states:
            def fn(x, h0, c0):
                y, (h, c) = m(x, (h0, c0))
                return y, h, c
        else:
            def fn(x):
                y, (h, c) = m(x)
                return y, h, c
    else:
        if with_states:
            def fn(x, h0):
                return m(x, h0)
        else:
            def fn(x):
                return m(x)
    return fn


def main():
    os.makedirs(HERE, exist_ok=True)
    np.random.seed(31)
    io = {}
    for name, (cls, args, kwargs, shape, with_states) in CONFIGS.items():
        m = cls(*args, **kwargs)
        m.eval()
        is_lstm = cls is M.LSTM
        batch = shape[0] if kwargs.get("batch_first") else shape[1]
        state = (m.num_directions * m.num_layers, batch, m.hidden_size)
        inputs = [np.random.randn(*shape).astype("float32")]
        if with_states:
            inputs += [np.random.randn(*state).astype("float32")
                       for _ in range(2 if is_lstm else 1)]
        f = trace(model_fn(m, is_lstm, with_states), symbolic=True, capture_as_const=True)
        outs = f(*[mge.tensor(a) for a in inputs])
        f.dump(os.path.join(HERE, f"{name}.mge"),
               arg_names=[f"x{i}" for i in range(len(inputs))],
               output_names=[f"y{i}" for i in range(len(outs))])
        for i, a in enumerate(inputs):
            io[f"{name}.x{i}"] = a
        for i, o in enumerate(outs):
            io[f"{name}.y{i}"] = o.numpy()
    np.savez_compressed(os.path.join(HERE, "io.npz"), **io)
    print("wrote", len(CONFIGS), "models")


if __name__ == "__main__":
    main()
