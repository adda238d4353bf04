"""megtrace.random: MegEngine 1.13's signatures and defaults, deterministic given the
seed, plausible distributions, and new numbers on every run of a traced function."""
import io

import numpy as np
import pytest

import megtrace as mge
import megtrace.random as R
from megtrace.errors import OptimizationSkippedWarning
from megtrace.jit import exclude_from_trace, trace


def test_seed_makes_draws_repeat():
    R.seed(11)
    a = [R.uniform(size=(3, 4)).numpy(), R.normal(size=(5,)).numpy()]
    R.seed(11)
    b = [R.uniform(size=(3, 4)).numpy(), R.normal(size=(5,)).numpy()]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(R.uniform(size=(3, 4)).numpy(), a[0])


def test_defaults_and_shapes():
    assert R.uniform().shape == (1,) and R.normal().shape == (1,)
    assert R.uniform(size=[10, 10]).shape == (10, 10)
    assert R.gamma(2.0, size=(3,)).shape == (3,)
    assert R.beta(mge.tensor([1.0, 2.0]), 3.0, size=(4,)).shape == (4, 2)
    assert R.poisson(mge.tensor([[1.0], [2.0]]), size=(5,)).shape == (5, 2, 1)
    with pytest.raises(AssertionError, match="low >= high"):
        R.uniform(1, 1)


def test_distributions_look_right():
    R.seed(0)
    u = R.uniform(2, 5, size=(20000,)).numpy()
    assert u.min() >= 2 and u.max() < 5 and abs(u.mean() - 3.5) < 0.05
    n = R.normal(1.0, 3.0, size=(20000,)).numpy()
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 3.0) < 0.1
    g = R.gamma(2.0, 1.5, size=(20000,)).numpy()
    assert abs(g.mean() - 3.0) < 0.1
    b = R.beta(2.0, 6.0, size=(20000,)).numpy()
    assert abs(b.mean() - 0.25) < 0.01
    p = R.poisson(4.0, size=(20000,)).numpy()
    assert abs(p.mean() - 4.0) < 0.1 and np.all(p == np.round(p))


def test_permutation_and_shuffle():
    p = R.permutation(10)
    assert p.dtype == np.int32 and sorted(p.numpy().tolist()) == list(range(10))
    assert R.permutation(5, dtype="float32").dtype == np.float32
    x = mge.tensor(np.arange(12).reshape(6, 2))
    rows = R.permutation(x).numpy()
    assert sorted(map(tuple, rows)) == sorted(map(tuple, x.numpy()))
    R.shuffle(x)
    assert sorted(map(tuple, x.numpy())) == [(2 * i, 2 * i + 1) for i in range(6)]


def test_rng_objects_have_their_own_streams():
    a, b = R.RNG(seed=5), R.RNG(seed=5)
    np.testing.assert_array_equal(a.uniform(size=(4,)).numpy(), b.uniform(size=(4,)).numpy())
    np.testing.assert_array_equal(a.normal(size=(4,)).numpy(), b.normal(size=(4,)).numpy())


def test_each_kind_of_op_has_its_own_eager_stream():
    """MegEngine 1.13 (tests/data/show_megengine_rng_streams.py): after seed(s), normal
    draws the same numbers whether or not uniform drew before it, and RNG(s) starts
    afresh whatever the global generator drew."""
    R.seed(21)
    R.uniform(size=(3,))
    R.uniform(size=(3,))
    after_uniforms = R.normal(size=(3,)).numpy()
    R.seed(21)
    first_uniform = R.uniform(size=(3,)).numpy()
    np.testing.assert_array_equal(R.normal(size=(3,)).numpy(), after_uniforms)
    np.testing.assert_array_equal(R.RNG(seed=21).uniform(size=(3,)).numpy(), first_uniform)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("without_host", [False, True])
def test_traced_draws_are_new_every_compiled_run(symbolic, without_host):
    """MegEngine's tracing call and its first compiled run both draw the op's first
    numbers; every later run draws new ones."""
    @trace(symbolic=symbolic, without_host=without_host)
    def f(x):
        return x + R.uniform(size=(64,)) + R.normal(size=(64,))

    x = mge.tensor(np.zeros(64, np.float32))
    runs = [f(x).numpy() for _ in range(5)]
    np.testing.assert_array_equal(runs[0], runs[1])
    for i in range(1, 5):
        for j in range(1, i):
            assert not np.allclose(runs[i], runs[j])
    assert all(abs(r.mean() - 0.5) < 0.5 for r in runs)


@pytest.mark.parametrize("symbolic", [False, True])
def test_traced_ops_draw_from_their_own_generators_as_in_megengine(symbolic):
    """MegEngine 1.13 (tests/data/show_megengine_rng_streams.py): each random opr of a
    compiled graph has its own generator, fresh from the op's seed. With seed 7 and eager
    draws u1, u2 there, a trace of two `uniform`s returned [u1, u1], [u1, u1], [u2, u2]
    on three calls, and the eager generator was left where it was."""
    R.seed(7)
    u1, u2 = (R.uniform(size=(2,)).numpy() for _ in range(2))
    R.seed(7)
    R.uniform(size=(2,))                       # the trace does not read the eager stream
    f = trace(lambda: (R.uniform(size=(2,)), R.uniform(size=(2,))), symbolic=symbolic)
    calls = [[t.numpy() for t in f()] for _ in range(3)]
    for got, want in zip(calls, [u1, u1, u2]):
        for t in got:
            np.testing.assert_array_equal(t, want)
    np.testing.assert_array_equal(R.uniform(size=(2,)).numpy(), u2)
    g = trace(lambda: R.uniform(size=(2,)), symbolic=symbolic)   # same seed: same start
    np.testing.assert_array_equal(g().numpy(), u1)


@pytest.mark.parametrize("draw", [lambda: R.gamma(2.0, size=(64,)),
                                  lambda: R.beta(2.0, 3.0, size=(64,)),
                                  lambda: R.poisson(2.0, size=(64,))])
def test_rejection_samplers_trace_on_the_interpreter(draw):
    f = trace(draw, symbolic=True, capture_as_const=True)
    runs = [f().numpy() for _ in range(3)]
    assert not np.array_equal(runs[1], runs[2])


def test_eager_only_generators_inside_exclude_from_trace():
    @trace
    def f(x):
        with exclude_from_trace():
            noise = R.gamma(2.0, size=(3,))
        return x + noise

    out = [f(mge.tensor(np.zeros(3, np.float32))).numpy() for _ in range(3)]
    assert not np.allclose(out[1], out[2]) and np.all(out[2] > 0)


def _uniform_normal(x):
    return x + R.uniform(size=(3,)) + R.normal(1.0, 2.0, size=(3,))


def _gamma_beta_poisson(x):
    return x + R.gamma(2.0, 1.5, size=(3,)) + R.beta(2.0, 3.0, size=(3,)) + \
        R.poisson(4.0, size=(3,))


def _seed7_trace(fn):
    """As tests/data/make_megengine_rng_dump.py traces it in MegEngine."""
    R.seed(7)
    f = trace(fn, symbolic=True, capture_as_const=True)
    f(mge.tensor(np.zeros(3, np.float32)))
    return f


def test_dump_writes_megengines_rng_oprs(tmp_path):
    from megtrace.fbs.reader import read_model
    path = tmp_path / "rng.mge"
    with pytest.warns(OptimizationSkippedWarning, match="optimize_for_inference skipped"):
        _seed7_trace(_uniform_normal).dump(path, arg_names=["x"])
    _seed7_trace(_gamma_beta_poisson).dump(tmp_path / "p.mge", optimize_for_inference=False)
    params = [p for f in ("rng.mge", "p.mge")
              for o in read_model((tmp_path / f).read_bytes()).oprs for p in o.params
              if p[0].endswith("RNG")]
    assert params == [("UniformRNG", {"seed": 7, "dtype": "Float32"}),
                      ("GaussianRNG", {"seed": 7, "mean": 1.0, "std": 2.0, "dtype": "Float32"}),
                      ("GammaRNG", {"seed": 7}), ("BetaRNG", {"seed": 7}),
                      ("PoissonRNG", {"seed": 7})]


@pytest.mark.lite
@pytest.mark.parametrize("fn, golden", [(_uniform_normal, "megengine_rng_seed7.mge"),
                                        (_gamma_beta_poisson, "megengine_rng_params_seed7.mge")])
def test_lite_draws_what_megengines_own_dump_draws(fn, golden, lite, tmp_path):
    """Same seed, same oprs: MegEngine Lite computes the same numbers from our file as
    from MegEngine's (tests/data/make_megengine_rng_dump.py)."""
    from pathlib import Path
    path = tmp_path / "rng.mge"
    _seed7_trace(fn).dump(path, arg_names=["x"], optimize_for_inference=False)
    x = {"x": np.full(3, 10.0, np.float32)}
    ours = lite.run_model(path, x)
    theirs = lite.run_model(Path(__file__).parent / "data" / golden, x)
    (a,), (b,) = ours.values(), theirs.values()
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3,) and not np.allclose(a, 10.0)


@pytest.mark.parametrize("fn", [_uniform_normal, _gamma_beta_poisson])
def test_loaded_model_draws_what_the_compiled_trace_drew(fn, tmp_path):
    """MegEngine 1.13 (tests/data/show_megengine_rng_streams.py): the .mge keeps each
    opr's seed; a loaded model's oprs each start a generator afresh from it, so its runs
    1, 2, ... draw what the trace's compiled runs drew, and loading again starts over."""
    from megtrace.graph_io import load_graph
    x = np.full(3, 10.0, np.float32)
    f = _seed7_trace(fn)                               # the tracing call
    compiled = [f(mge.tensor(x)).numpy() for _ in range(3)]
    path = tmp_path / "rng.mge"
    f.dump(path, arg_names=["x"], optimize_for_inference=False)
    model = load_graph(path)
    assert [i.name for i in model.inputs] == ["x"]
    runs = [list(model.run(x).values())[0] for _ in range(3)]
    for got, want in zip(runs, compiled):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(list(load_graph(path).run(x).values())[0], runs[0])


@pytest.mark.parametrize("golden", ["megengine_rng_seed7.mge", "megengine_rng_params_seed7.mge"])
def test_megengines_own_rng_dump_loads_with_its_run_structure(golden):
    """MegEngine's file (tests/data/make_megengine_rng_dump.py) reads back: new numbers
    on every run, the same sequence for every load (megtrace's bits, not MegEngine's)."""
    from pathlib import Path

    from megtrace.graph_io import load_graph
    path = Path(__file__).parent / "data" / golden
    x = np.full(3, 10.0, np.float32)
    runs = [list(load_graph(path).run(x).values())[0] for _ in range(2)]
    model = load_graph(path)
    again = [list(model.run(x).values())[0] for _ in range(2)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(again[0], runs[0])
    assert not np.array_equal(again[0], again[1])
    assert again[0].shape == (3,) and np.all(np.isfinite(again[1]))


def test_rng_results_live_on_its_device():
    """MegEngine's RNG(device=...): every method's result is on that device, and the
    same seed gives the same numbers on another device."""
    on1, on2 = R.RNG(seed=111, device="xpu0"), R.RNG(seed=111, device="xpu1")
    for draw in (lambda g: g.uniform(size=(5,)), lambda g: g.uniform(-3, 2, size=(5,)),
                 lambda g: g.normal(1, 2, size=(5,)), lambda g: g.gamma(2.0, size=(5,)),
                 lambda g: g.beta(1.0, 2.0, size=(5,)), lambda g: g.poisson(3.0, size=(5,)),
                 lambda g: g.permutation(5)):
        a, b = draw(on1), draw(on2)
        assert a.device == "xpu0" and b.device == "xpu1"
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_permutation_of_a_scalar_tensor_is_one_element():
    out = R.permutation(mge.tensor(7))
    assert out.shape == (1,) and out.numpy().tolist() == [7]


@pytest.mark.parametrize("symbolic", [False, True])
def test_dropout_draws_a_new_mask_on_every_traced_call(symbolic):
    x = mge.tensor(np.ones(2000, "float32"))
    f = trace(lambda x: mge.functional.nn.dropout(x, 0.25), symbolic=symbolic)
    outs = [f(x).numpy() for _ in range(3)]
    for out in outs:
        np.testing.assert_allclose(np.unique(out), [0.0, 1 / 0.75], rtol=1e-6)
        assert abs((out == 0).mean() - 0.25) < 0.05
    # as MegEngine's traced dropout: the tracing call and the first compiled run draw
    # the same mask, later runs new ones
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[1], outs[2])


def test_size_may_be_a_counted_tensor():
    """MegEngine's detection samplers draw `uniform(size=mask.sum())` (Models,
    layers/det/sampling.py); MegEngine 1.13 gives shape (3,) here."""
    import megtrace.random as R
    labels = mge.tensor(np.array([1, -1, 0, 1, 1, -1], "int32"))
    n = (labels == 1).sum()
    assert R.uniform(size=n).shape == (3,)
    assert R.normal(size=n).shape == (3,)
    assert R.uniform(size=(n, 2)).shape == (3, 2)
    values = R.uniform(size=n).numpy()
    assert ((values >= 0) & (values < 1)).all()


def test_get_device_count_by_fork_counts_like_get_device_count():
    """MegEngine's model scripts count GPUs with the deprecated helper."""
    import megtrace.distributed.helper as helper
    assert helper.get_device_count_by_fork("gpu") == mge.get_device_count("gpu") == 0
    assert helper.get_device_count_by_fork("cpu") == mge.get_device_count("cpu") >= 1
