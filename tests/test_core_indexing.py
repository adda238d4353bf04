"""Tensor indexing and item assignment: NumPy's answers eagerly, the same when traced and
compiled, and in .mge files exactly as MegEngine 1.13 writes them (golden dumps made by
tests/data/make_megengine_indexing.py), which megtrace reads and MegEngine Lite runs."""
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
from megtrace.fbs.reader import read_model
from megtrace.jit import trace

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
from indexing_cases import CASES  # noqa: E402

GOLDEN = DATA / "megengine_indexing"
INDEXING_OPRS = ("Subtensor", "SetSubtensor", "IndexingMultiAxisVec", "IndexingSetMultiAxisVec")

X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
I2 = np.array([0, 1])
GET_FORMS = {
    "int-slice": (1, slice(None, None, -2)),
    "ellipsis-none": (Ellipsis, None, 1),
    "two-vectors-adjacent": (slice(None), I2, I2),
    "two-vectors-apart": (I2, slice(None), I2),
    "int-and-vector": (1, slice(None), I2),
    "2d-index": (np.array([[0, 1], [1, 0]]),),
    "broadcast-vectors": (slice(None), np.array([[0], [2]]), np.array([1, 3])),
    "vector-none-vector": (I2, None, I2),
    "mask-1d": (slice(None), np.array([True, False, True])),
    "mask-2d": (np.array([[True, False, True], [False, False, True]]),),
    "mask-and-vector": (np.array([False, True]), np.array([2])),
    "negative-indices": (slice(None), -1, np.array([-1, 0])),
    "list-of-ints": ([1, 0],),
    "list-of-bools": [True, False],
    "empty-vector": ([],),
}


def _golden(name):
    data = np.load(GOLDEN / "cases.npz")
    inputs = [data[k] for k in sorted(k for k in data.files if k.startswith(f"{name}.in"))]
    return inputs, data[f"{name}.out"]


@pytest.mark.parametrize("index", GET_FORMS.values(), ids=GET_FORMS.keys())
def test_getitem_matches_numpy(index):
    got = mge.tensor(X)[index]
    want = X[index]
    assert got.shape == want.shape and np.array_equal(got.numpy(), want)


@pytest.mark.parametrize("index", GET_FORMS.values(), ids=GET_FORMS.keys())
def test_setitem_matches_numpy(index, rng):
    want = X.copy()
    value = rng.uniform(size=want[index].shape[-1:]).astype(np.float32)
    want[index] = value
    x = mge.tensor(X)
    alias = x
    x[index] = value
    assert alias is x and np.array_equal(x.numpy(), want)


def test_masked_fill_with_a_traced_mask():
    @trace(symbolic=True)
    def fill(x):
        x[x > 3] = 0.0
        return x
    for _ in range(3):
        data = np.random.uniform(0, 6, size=(3, 4)).astype(np.float32)
        assert np.array_equal(fill(mge.tensor(data)).numpy(), np.where(data > 3, 0, data))


def test_indexing_errors_are_megengines():
    x = mge.tensor(np.arange(9, dtype=np.float32).reshape(3, 3))
    with pytest.raises(IndexError, match="only one ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="too many indices"):
        x[mge.tensor([1, 2]), mge.tensor([1, 2]), mge.tensor([1, 2])]
    with pytest.raises(ValueError, match="cannot copy tensor with shape"):
        x[:] = mge.tensor([1.0, 2.0])
    with pytest.raises(IndexError, match="out of bounds"):
        x[3]


@pytest.mark.parametrize("symbolic", [False, True])
def test_traced_indexing_follows_new_index_values(symbolic):
    @trace(symbolic=symbolic)
    def f(x, v, i, j):
        x[i, :, j] = v
        return x[1:, i] * 2, x
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.uniform(size=(4, 5, 3)).astype(np.float32)
        v = rng.uniform(size=(2, 5)).astype(np.float32)
        i = rng.permutation(4)[:2].astype(np.int32)
        j = rng.integers(-3, 3, size=2).astype(np.int32)
        got_a, got_x = f(*[mge.tensor(a) for a in (x, v, i, j)])
        x[i, :, j] = v
        assert np.array_equal(got_x.numpy(), x)
        assert np.array_equal(got_a.numpy(), x[1:, i] * 2)


@pytest.mark.parametrize("symbolic", [False, True])
def test_empty_tensors_trace_and_run(symbolic):
    x = np.zeros((10, 0, 10), np.float32)

    @trace(symbolic=symbolic)
    def f(x):
        x[2:5] = x[2:5] + 1
        return x[[1, 2]], x[3, 10:1:1, 5], x.sum(axis=1)
    for _ in range(2):
        outs = f(mge.tensor(x))
        for got, want in zip(outs, (x[[1, 2]], x[3, 10:1:1, 5], x.sum(axis=1))):
            assert got.shape == want.shape and np.array_equal(got.numpy(), want)


@pytest.mark.parametrize("name", CASES)
def test_megengines_indexing_dumps_load_and_run(name):
    inputs, want = _golden(name)
    model = mge.load_graph(GOLDEN / f"{name}.mge")
    got = model(**{f"a{i}": a for i, a in enumerate(inputs)}).numpy()   # the file lists
    # its inputs in the order the graph first uses them
    assert got.shape == want.shape and np.array_equal(got, want)


def _last_indexing_opr(path):
    oprs = [o for o in read_model(Path(path).read_bytes()).oprs if o.type in INDEXING_OPRS]
    return oprs[-1].type, oprs[-1].params


@pytest.mark.parametrize("optimize", [False, True], ids=["plain", "optimized"])
@pytest.mark.parametrize("name", CASES)
def test_our_dumps_write_indexing_as_megengine_does(name, optimize, tmp_path):
    fn, _ = CASES[name]
    inputs, want = _golden(name)
    traced = trace(symbolic=True, capture_as_const=True)(fn)
    assert np.array_equal(traced(*[mge.tensor(a) for a in inputs]).numpy(), want)
    path = tmp_path / f"{name}.mge"
    traced.dump(path, arg_names=[f"a{i}" for i in range(len(inputs))], output_names=["out"],
                optimize_for_inference=optimize)
    assert _last_indexing_opr(path) == _last_indexing_opr(GOLDEN / f"{name}.mge")
    got = mge.load_graph(path)(*inputs).numpy()
    assert got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.lite
@pytest.mark.parametrize("name", CASES)
def test_our_indexing_dumps_run_in_megengine_lite(name, lite, tmp_path):
    fn, _ = CASES[name]
    inputs, want = _golden(name)
    traced = trace(symbolic=True, capture_as_const=True)(fn)
    traced(*[mge.tensor(a) for a in inputs])
    path = tmp_path / f"{name}.mge"
    names = [f"a{i}" for i in range(len(inputs))]
    traced.dump(path, arg_names=names, output_names=["out"])
    outs = lite.run_model(path, dict(zip(names, inputs)))
    assert rel_err(outs["out"], want) == 0


@pytest.mark.parametrize("symbolic", [False, True])
def test_constant_mask_inside_a_trace(symbolic):
    @trace(symbolic=symbolic)
    def f(x):
        mask = mge.tensor([1, 0, 1]) > 0          # constants only: folded when traced
        return x[mask] * 2
    for _ in range(3):
        assert f(mge.tensor([1.0, 2.0, 3.0])).numpy().tolist() == [2.0, 6.0]
