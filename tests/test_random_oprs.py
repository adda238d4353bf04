"""MegEngine 1.13's PermutationRNG, ShuffleRNG and Dropout oprs (golden dumps from
tests/data/make_megengine_rng_perm_dumps.py, seed 5): megtrace reads them (new draws on
every run, the same sequence for every load), writes F.random.permutation(n),
permutation(tensor) and F.nn.dropout as those oprs with MegEngine's params, and the
real Lite draws the same numbers from megtrace's file as from MegEngine's. Dropout has
a generator of its own (tests/data/show_megengine_dropout_stream.py)."""
import threading
from pathlib import Path

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.random as R
from megtrace.fbs.reader import read_model
from megtrace.graph_io import load_graph
from megtrace.jit import trace

DATA = Path(__file__).parent / "data" / "megengine_rng_perm"
X6 = np.arange(6, dtype=np.float32)
X62 = np.arange(12, dtype=np.float32).reshape(6, 2)


def permutation(x):
    return x + R.permutation(6, dtype="float32")


def permutation_int16(x):
    return R.permutation(7, dtype="int16")


def shuffled(x):
    return R.permutation(x)


def dropout(x):
    return F.nn.dropout(x, 0.25, training=True)


CASES = {"permutation": (permutation, X6), "permutation_int16": (permutation_int16, X6),
         "shuffled": (shuffled, X62), "dropout": (dropout, X62)}
RANDOM_OPRS = ("PermutationRNG", "ShuffleRNG", "Dropout")


def _check_draw(name, out):
    if name == "permutation":
        assert sorted(out - X6) == list(range(6))
    elif name == "permutation_int16":
        assert out.dtype == np.int16 and sorted(out) == list(range(7))
    elif name == "shuffled":
        assert sorted(map(tuple, out)) == sorted(map(tuple, X62))
    else:
        assert set(np.unique(out[X62 != 0] / X62[X62 != 0])) <= {0.0, np.float32(1 / 0.75)}


def _feeds(name, path):
    return {"x": CASES[name][1]} if "x" in [i.name for i in load_graph(path).inputs] else {}


@pytest.mark.parametrize("name", list(CASES))
def test_megengines_dump_loads_with_its_run_structure(name):
    path = DATA / f"{name}.mge"
    feeds = _feeds(name, path)
    model = load_graph(path)
    runs = [list(model.run(**feeds).values())[0] for _ in range(6)]
    for out in runs:
        _check_draw(name, out)
    assert any(not np.array_equal(runs[0], r) for r in runs[1:])     # new draws per run
    again = list(load_graph(path).run(**feeds).values())[0]
    np.testing.assert_array_equal(again, runs[0])                   # a new load starts over


def _ours(name, tmp_path) -> Path:
    fn, x = CASES[name]
    R.seed(5)
    f = trace(fn, symbolic=True, capture_as_const=True)
    f(mge.tensor(x))
    path = tmp_path / f"{name}.mge"
    f.dump(path, arg_names=["x"], optimize_for_inference=False)
    return path


def _random_oprs(path: Path):
    return [(o.type, o.params, len(o.outputs)) for o in read_model(path.read_bytes()).oprs
            if o.type in RANDOM_OPRS]


@pytest.mark.parametrize("name", list(CASES))
def test_megtrace_writes_megengines_oprs(name, tmp_path):
    ours = _random_oprs(_ours(name, tmp_path))
    assert ours and ours == _random_oprs(DATA / f"{name}.mge")


@pytest.mark.lite
def test_lite_draws_what_megengines_own_dump_draws(lite, tmp_path):
    jobs = []
    for name in CASES:
        ours, theirs = _ours(name, tmp_path), DATA / f"{name}.mge"
        jobs += [(ours, _feeds(name, ours)), (theirs, _feeds(name, theirs))]
    results = lite.run_models(jobs)
    for name, a, b in zip(CASES, results[::2], results[1::2]):
        assert not isinstance(a, str) and not isinstance(b, str), (name, a, b)
        (got,), (want,) = a.values(), b.values()
        _check_draw(name, got)
        np.testing.assert_array_equal(got, want)


def test_dropout_has_a_stream_of_its_own():
    """As MegEngine's (tests/data/show_megengine_dropout_stream.py): uniform and
    permutation draws do not move dropout's stream, dropout's do not move uniform's."""
    x = mge.tensor(np.ones(64, np.float32))
    R.seed(3)
    a = F.nn.dropout(x, 0.5).numpy()
    R.seed(3)
    R.uniform(size=(4,))
    R.permutation(5)
    np.testing.assert_array_equal(F.nn.dropout(x, 0.5).numpy(), a)
    assert not np.array_equal(F.nn.dropout(x, 0.5).numpy(), a)
    R.seed(3)
    u = R.uniform(size=(4,)).numpy()
    R.seed(3)
    F.nn.dropout(x, 0.5)
    np.testing.assert_array_equal(R.uniform(size=(4,)).numpy(), u)


def test_dropout_gradient_uses_the_forward_mask():
    x = mge.tensor(np.linspace(1, 2, 40, dtype=np.float32))
    gm = mge.autodiff.GradManager().attach([x])
    with gm:
        y = F.nn.dropout(x, 0.4)
        gm.backward(y.sum())
    np.testing.assert_allclose(x.grad.numpy(), y.numpy() / x.numpy(), rtol=1e-6)


def test_concurrent_runs_of_a_loaded_model_draw_distinct_numbers():
    """Each run takes its own draw number under the generator's lock: N threads running
    one loaded model at once get exactly the draws of N runs in a row."""
    import sys
    path = DATA / "permutation.mge"
    n = 8
    model_seq = load_graph(path)
    sequential = [tuple(list(model_seq.run(x=X6).values())[0]) for _ in range(n)]
    model = load_graph(path)
    outs, barrier = [], threading.Barrier(n)

    def work():
        barrier.wait()
        outs.append(tuple(list(model.run(x=X6).values())[0]))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert sorted(outs) == sorted(sequential)
