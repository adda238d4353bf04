"""M.RNN / M.LSTM in .mge files, against real MegEngine 1.13
(tests/data/make_megengine_recurrent_dumps.py): MegEngine writes them as its RNNForward /
LSTMForward oprs; megtrace reads those files and computes MegEngine's outputs, writes
the same oprs with the same params, and the real Lite runs megtrace's files to
MegEngine's outputs."""
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.module as M
from megtrace import load_graph
from megtrace.fbs.reader import read_model
from megtrace.jit import trace

DATA = Path(__file__).resolve().parents[1] / "data" / "megengine_recurrent"
# the configurations of the make script: (class, args, kwargs, initial states given)
CONFIGS = {
    "rnn_tanh": (M.RNN, (3, 4), {}, True),
    "rnn_relu_2l_bi": (M.RNN, (3, 4, 2), {"nonlinearity": "relu", "bidirectional": True},
                       False),
    "rnn_nobias_bf": (M.RNN, (3, 4, 2), {"bias": False, "batch_first": True}, True),
    "lstm": (M.LSTM, (3, 4), {}, True),
    "lstm_2l_bi": (M.LSTM, (3, 4, 2), {"bidirectional": True}, False),
    "lstm_3l_bi_bf_nobias": (M.LSTM, (3, 5, 3), {"bidirectional": True, "batch_first": True,
                                                  "bias": False}, True),
}
RECURRENT = ("RNNForward", "LSTMForward")


def _io(name):
    io = np.load(DATA / "io.npz")
    xs = {k.split(".")[1]: io[k] for k in io.files if k.startswith(f"{name}.x")}
    ys = [io[f"{name}.y{i}"] for i in range(sum(k.startswith(f"{name}.y") for k in io.files))]
    return xs, ys


def _recurrent_opr(path: Path):
    (opr,) = [o for o in read_model(path.read_bytes()).oprs if o.type in RECURRENT]
    return opr


def _weights(path: Path) -> np.ndarray:
    """The flatten_weights constant of MegEngine's file."""
    model = read_model(path.read_bytes())
    made = {v: o for o in model.oprs for v in o.outputs}
    return made[_recurrent_opr(path).inputs[-1]].tensors[0].data


@pytest.mark.parametrize("name", list(CONFIGS))
def test_megengine_dump_loads_and_computes_megengines_outputs(name):
    xs, want = _io(name)
    got = load_graph(DATA / f"{name}.mge").run(**xs)
    assert len(got) == len(want)
    for i, w in enumerate(want):
        assert rel_err(got[f"y{i}"], w) <= 1e-5, (name, i)


def _dump_ours(name, tmp_path) -> Path:
    cls, args, kwargs, with_states = CONFIGS[name]
    m = cls(*args, **kwargs).eval()
    m.load_state_dict({**m.state_dict(), "_flatten_weights": _weights(DATA / f"{name}.mge")})
    lstm = cls is M.LSTM

    def fn(x, *states):
        hx = (tuple(states) if lstm else states[0]) if states else None
        y, h = m(x, hx)
        return (y, *h) if lstm else (y, h)
    xs, want = _io(name)
    f = trace(fn, symbolic=True, capture_as_const=True)
    f(*[mge.tensor(xs[k]) for k in sorted(xs)])
    path = tmp_path / f"{name}.mge"
    f.dump(path, arg_names=sorted(xs), output_names=[f"y{i}" for i in range(len(want))])
    return path


@pytest.mark.parametrize("name", ["rnn_relu_2l_bi", "rnn_nobias_bf", "lstm_3l_bi_bf_nobias"])
def test_megtrace_writes_megengines_opr_with_megengines_params(name, tmp_path):
    ours = _recurrent_opr(_dump_ours(name, tmp_path))
    theirs = _recurrent_opr(DATA / f"{name}.mge")
    assert (ours.type, ours.params) == (theirs.type, theirs.params)
    assert len(ours.outputs) == len(theirs.outputs)      # the reserve space too


@pytest.mark.lite
def test_lite_runs_megtraces_dumps_to_megengines_outputs(lite, tmp_path):
    jobs, wants = [], []
    for name in CONFIGS:
        xs, want = _io(name)
        jobs.append((_dump_ours(name, tmp_path), xs))
        wants.append(want)
    for (path, _), got, want in zip(jobs, lite.run_models(jobs), wants, strict=True):
        assert not isinstance(got, str), f"{path.name}: {got}"
        for i, w in enumerate(want):
            assert rel_err(got[f"y{i}"], w) <= 1e-5, (path.name, i)


def test_megtrace_reads_its_own_dump_back(tmp_path):
    xs, want = _io("lstm_2l_bi")
    got = load_graph(_dump_ours("lstm_2l_bi", tmp_path)).run(**xs)
    for i, w in enumerate(want):
        assert rel_err(got[f"y{i}"], w) <= 1e-5
