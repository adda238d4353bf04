"""M.RNN and M.LSTM: MegEngine 1.13's parameters and flattened weight layout, checked
against real MegEngine (tests/data/make_megengine_rnn_layers.py), an independent NumPy
reference, the traced/compiled graph, and the real Lite runtime on our dump."""
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.module as M
from megtrace.jit import trace

GOLDEN = Path(__file__).parent / "data" / "megengine_rnn_layers.npz"
CONFIGS = {
    "rnn_tanh": (M.RNN, (3, 4), {}),
    "rnn_relu_2l_bi": (M.RNN, (3, 4, 2), {"nonlinearity": "relu", "bidirectional": True}),
    "rnn_nobias_bf": (M.RNN, (3, 4, 2), {"bias": False, "batch_first": True}),
    "lstm": (M.LSTM, (3, 4), {}),
    "lstm_2l_bi": (M.LSTM, (3, 4, 2), {"bidirectional": True}),
    "lstm_3l_bi_bf_nobias": (M.LSTM, (3, 5, 3), {"bidirectional": True,
                                                  "batch_first": True, "bias": False}),
}


def _module(name, weights=None):
    cls, args, kwargs = CONFIGS[name]
    m = cls(*args, **kwargs).eval()
    if weights is not None:
        m.load_state_dict({**m.state_dict(), "_flatten_weights": weights})
    return m


def _states(d, name):
    if f"{name}.h0" not in d:
        return None
    h0 = mge.tensor(d[f"{name}.h0"])
    return (h0, mge.tensor(d[f"{name}.c0"])) if f"{name}.c0" in d else h0


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_megengine(name):
    d = np.load(GOLDEN)
    m = _module(name, d[f"{name}.weights"])
    y, h = m(mge.tensor(d[f"{name}.x"]), _states(d, name))
    if isinstance(h, tuple):
        h, c = h
        assert rel_err(c.numpy(), d[f"{name}.c"]) <= 1e-5
    assert rel_err(y.numpy(), d[f"{name}.y"]) <= 1e-5
    assert rel_err(h.numpy(), d[f"{name}.h"]) <= 1e-5


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _reference(kind, flat, x, h0, c0, layers, hidden, bidirectional, bias):
    """Written from MegEngine's documented semantics and weight layout, in float64."""
    dirs = 2 if bidirectional else 1
    gates = 4 if kind == "lstm" else 1
    flat, pos = flat.astype(np.float64).reshape(-1), 0

    def take(n, *shape):
        nonlocal pos
        pos += n
        return flat[pos - n:pos].reshape(shape)
    seq, batch = x.shape[:2]
    inp, hn, cn = x.astype(np.float64), [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            width = inp.shape[2]
            w_ih = take(gates * hidden * width, gates * hidden, width)
            w_hh = take(gates * hidden * hidden, gates * hidden, hidden)
            b = take(gates * hidden, gates * hidden) + take(gates * hidden, gates * hidden) \
                if bias else np.zeros(gates * hidden)
            h, c = h0[layer * dirs + d].astype(np.float64), c0[layer * dirs + d].astype(np.float64)
            ys = np.zeros((seq, batch, hidden))
            for t in (range(seq) if d == 0 else reversed(range(seq))):
                z = inp[t] @ w_ih.T + h @ w_hh.T + b
                if kind == "lstm":
                    i, f, g, o = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
                    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
                    h = _sigmoid(o) * np.tanh(c)
                else:
                    h = np.tanh(z)
                ys[t] = h
            outs.append(ys)
            hn.append(h)
            cn.append(c)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(hn), np.stack(cn)


@pytest.mark.parametrize("kind", ["lstm", "rnn"])
def test_matches_an_independent_reference(kind, rng):
    cls = M.LSTM if kind == "lstm" else M.RNN
    m = cls(3, 4, 2, bidirectional=True).eval()
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((4, 2, 4)).astype(np.float32)
    c0 = rng.standard_normal((4, 2, 4)).astype(np.float32)
    states = (mge.tensor(h0), mge.tensor(c0)) if kind == "lstm" else mge.tensor(h0)
    y, h = m(mge.tensor(x), states)
    want_y, want_h, want_c = _reference(kind, m._flatten_weights.numpy(), x, h0,
                                        c0 if kind == "lstm" else np.zeros_like(h0), 2, 4,
                                        True, True)
    assert rel_err(y.numpy(), want_y) <= 1e-5
    if kind == "lstm":
        h, c = h
        assert rel_err(c.numpy(), want_c) <= 1e-5
    assert rel_err(h.numpy(), want_h) <= 1e-5


def test_parameters_are_megengines():
    m = M.LSTM(3, 4, 2, bidirectional=True)
    names = dict(m.named_parameters())
    assert names["_flatten_weights"].shape == (16, 46)
    assert names["cells.1.1.weight_ih"].shape == (16, 8)
    assert len(names) == 17
    assert dict(M.RNN(3, 4, bias=False).named_parameters()).keys() == {
        "_flatten_weights", "cells.0.0.weight_hh", "cells.0.0.weight_ih"}


def test_bad_arguments():
    with pytest.raises(ValueError, match="Dropout should be a float in"):
        M.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        M.LSTM(3, 4, proj_size=4)
    with pytest.raises(NotImplementedError, match="proj_size"):
        M.LSTM(3, 4, proj_size=2)
    m = M.RNN(3, 4)
    with pytest.raises(ValueError, match="input_size=3"):
        m(mge.tensor(np.zeros((5, 2, 6), np.float32)))
    with pytest.raises(ValueError, match=r"hidden state must have shape \(1, 2, 4\)"):
        m(mge.tensor(np.zeros((5, 2, 3), np.float32)), mge.tensor(np.zeros((2, 2, 4), np.float32)))


def test_dropout_between_layers_only_in_training(rng):
    m = M.LSTM(3, 4, 2, dropout=0.5)
    x = mge.tensor(rng.standard_normal((4, 2, 3)).astype(np.float32))
    m.eval()
    first, again = m(x)[0].numpy(), m(x)[0].numpy()
    assert np.array_equal(first, again)
    m.train()
    assert not np.array_equal(m(x)[0].numpy(), first)


@pytest.mark.parametrize("name", ["rnn_relu_2l_bi", "lstm_3l_bi_bf_nobias"])
def test_training_with_dropout_runs_the_layers_one_by_one(name, rng, monkeypatch):
    """In training with dropout the module runs the op layer by layer on slices of the
    flat buffer; with dropout made the identity it computes what the whole op does,
    forward and backward."""
    from megtrace.autodiff import GradManager
    cls, args, kwargs = CONFIGS[name]
    m = cls(*args, **kwargs, dropout=0.5)
    batch_first = kwargs.get("batch_first", False)
    x = mge.tensor(rng.standard_normal((2, 4, 3) if batch_first else (4, 2, 3))
                   .astype(np.float32))

    def run(training):
        m.train(training)
        gm = GradManager().attach(m.parameters())
        with gm:
            out, hidden = m(x)
            hidden = hidden if isinstance(hidden, tuple) else (hidden,)
            gm.backward((out ** 2).sum() + sum((h ** 3).sum() for h in hidden))
        grad = m._flatten_weights.grad.numpy().copy()
        m._flatten_weights.grad = None
        return [out.numpy()] + [h.numpy() for h in hidden], grad
    want, want_grad = run(False)                    # one op for every layer
    monkeypatch.setattr(M.rnn.F.nn, "dropout", lambda t, p: t)
    got, got_grad = run(True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-4, atol=1e-5)
    flat = want_grad.reshape(-1)        # the first and the last layer's cells both learn
    assert flat[:flat.size // 3].any() and flat[-(flat.size // 3):].any()


@pytest.mark.lite
def test_traced_compiled_and_dumped_lstm_runs_in_lite(lite, rng, tmp_path):
    m = M.LSTM(3, 4, 2, bidirectional=True, batch_first=True).eval()

    @trace(symbolic=True, capture_as_const=True)
    def run(x):
        y, (h, c) = m(x)
        return y, h, c
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    want = [t.numpy() for t in (m(mge.tensor(x))[0], *m(mge.tensor(x))[1])]
    for _ in range(2):                                  # record, then the compiled graph
        got = run(mge.tensor(x))
        for g, w in zip(got, want):
            assert rel_err(g.numpy(), w) <= 1e-5
    path = tmp_path / "lstm.mge"
    run.dump(path, arg_names=["x"], output_names=["y", "h", "c"])
    outs = lite.run_model(path, {"x": x})
    for name, w in zip(["y", "h", "c"], want):
        assert rel_err(outs[name], w) <= 1e-5
