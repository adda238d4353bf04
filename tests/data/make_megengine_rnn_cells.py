"""Golden RNNCell/LSTMCell outputs from MegEngine 1.13 (run in the megref chroot:
/work/shared/megref/mpy tests/data/make_megengine_rnn_cells.py). Writes
megengine_rnn_cells.npz: each cell's parameters, inputs and outputs."""
import os

import numpy as np

import megengine as mge
import megengine.module as M

np.random.seed(11)
x = np.random.randn(3, 5).astype("float32")
h = np.random.randn(3, 4).astype("float32")
c = np.random.randn(3, 4).astype("float32")
out = {"x": x, "h": h, "c": c}
for name, cell in (("rnn_tanh", M.RNNCell(5, 4)), ("rnn_relu", M.RNNCell(5, 4, nonlinearity="relu")),
                   ("lstm", M.LSTMCell(5, 4))):
    for key, p in cell.named_parameters():
        out[f"{name}.{key}"] = p.numpy()
    if name == "lstm":
        hn, cn = cell(mge.tensor(x), (mge.tensor(h), mge.tensor(c)))
        out["lstm.h_out"], out["lstm.c_out"] = hn.numpy(), cn.numpy()
        out["lstm.h_out_nohx"] = cell(mge.tensor(x))[0].numpy()
    else:
        out[f"{name}.h_out"] = cell(mge.tensor(x), mge.tensor(h)).numpy()
np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "megengine_rnn_cells.npz"), **out)
print("wrote", len(out), "arrays")
