"""relay_bridge/cpu/fast_math: the polynomial exp / erf / tanh / sigmoid, GELU and softmax
compiled by the CPU rules, element by element against float64 NumPy (math.erf for erf),
in the generic kernels and in a dense rule's epilogue; MEGTRACE_FAST_MATH=0 keeps libm."""
import math

import numpy as np
import pytest
from conftest import rel_err

from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.cpu import fast_math

REL = 1e-5           # elementwise relative error allowed (the kernels reach ~1e-6)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    e = np.exp(-np.abs(x))                     # never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


REFS = {
    "exp": np.exp,
    "erf": _erf,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
}
RANGES = {"exp": 87.0, "erf": 6.0, "tanh": 12.0, "sigmoid": 80.0, "gelu": 8.0}


def _compile(op, x, *extra, **params):
    g = Graph()
    y = g.add_node(get(op), [g.add_input(TensorType.of(x), "x"), *extra], params)[0]
    g.set_outputs([y], ["y"])
    return compile_graph(g, cache=False)


def _elementwise_ok(got, want, tiny=1e-30):
    want = np.asarray(want, np.float64)
    err = np.abs(got.astype(np.float64) - want)
    bad = err > REL * np.abs(want) + tiny
    assert not bad.any(), (f"{bad.sum()} elements off, worst at x-index "
                           f"{np.argmax(err / (np.abs(want) + tiny))}")


@pytest.fixture
def values(rng):
    def make(op):
        lim = RANGES[op]
        dense = np.linspace(-lim, lim, 40000)
        tiny = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-7, -3e-5, 2e-3, -0.1, 0.5, 1.0])
        return np.concatenate([dense, tiny, rng.standard_normal(1990)]).astype(np.float32)
    return make


@pytest.mark.parametrize("op", sorted(REFS))
def test_fast_unary_matches_float64(op, values, monkeypatch):
    monkeypatch.setenv(fast_math.ENV, "1")
    x = values(op)
    cg = _compile(op, x)
    assert cg.pipeline == "cpu-rules"
    # GELU's far negative tail is x (1 + erf) / 2 with erf within 1e-6 of -1: there the
    # error is measured against |x| (float32 libm gives 0 for a true -5e-15 at x = -8)
    tiny = 1e-6 * np.abs(x) if op == "gelu" else 1e-30
    _elementwise_ok(cg(x)[0], REFS[op](x.astype(np.float64)), tiny)


@pytest.mark.parametrize("op", ["exp", "erf", "tanh", "sigmoid"])
def test_special_values(op, monkeypatch):
    monkeypatch.setenv(fast_math.ENV, "1")
    x = np.array([np.inf, -np.inf, np.nan, 200.0, -200.0, 88.5, -87.0, -87.5, 0.0] + [0.0] * 7,
                 np.float32)
    got = _compile(op, x)(x)[0]
    with np.errstate(over="ignore"):
        want = REFS[op](x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=REL, atol=2e-38)


def test_kernels_call_no_libm(monkeypatch):
    """The point of the module: a vectorized loop of fast_exp / fast_erf / fast_tanh has
    no expf/erff/tanhf call left (each lane would call it)."""
    import tvm
    from megtrace.relay_bridge.targets import host_target
    te = tvm.te
    x = te.placeholder((1024,), "float32", name="x")
    for name in ("exp", "erf", "tanh", "sigmoid"):
        y = te.compute((1024,), lambda i: fast_math.FAST[name](x[i]), name="y")
        sch = tvm.s_tir.Schedule(te.create_prim_func([x, y]))
        _, inner = sch.split(sch.get_loops(sch.get_sblock("y"))[0], [None, 16])
        sch.vectorize(inner)
        asm = tvm.tirx.build(sch.mod, target=host_target()).inspect_source("asm")
        assert "expf" not in asm and "erff" not in asm and "tanhf" not in asm, name


@pytest.mark.parametrize("shape,axis", [((2, 12, 37, 37), -1), ((3, 50, 7), 1), ((64,), 0),
                                        ((2, 3, 128), -1), ((5, 48), 1)])
def test_softmax_matches_float64(shape, axis, rng, monkeypatch):
    monkeypatch.setenv(fast_math.ENV, "1")
    x = (rng.standard_normal(shape) * 8).astype(np.float32)
    x.flat[::11] = -1e30                       # masked logits
    got = _compile("softmax", x, axis=axis)(x)[0]
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    want = e / e.sum(axis=axis, keepdims=True)
    _elementwise_ok(got, want, tiny=1e-12)


@pytest.mark.parametrize("shape", [(128, 768), (2, 5, 64), (3, 40)])
def test_layer_norm_matches_float64(shape, rng, monkeypatch):
    """Rows of 16 q (lane-partial sums) and others (TVM's legalization)."""
    monkeypatch.setenv(fast_math.ENV, "1")
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    gamma, beta = rng.standard_normal(shape[-1:]).astype(np.float32), \
        rng.standard_normal(shape[-1:]).astype(np.float32)
    g = Graph()
    y = g.add_node(get("layer_norm"), [g.add_input(TensorType.of(x), "x"), g.add_const(gamma),
                                       g.add_const(beta)], {"normalized_dim": 1})[0]
    g.set_outputs([y], ["y"])
    cg = compile_graph(g, cache=False)
    assert cg.pipeline == "cpu-rules"
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5) \
        * gamma + beta
    assert rel_err(cg(x)[0], want) <= REL


def test_gelu_epilogue_of_a_dense_rule(rng, monkeypatch):
    monkeypatch.setenv(fast_math.ENV, "1")
    a, w = rng.standard_normal((8, 96)).astype(np.float32), \
        (rng.standard_normal((96, 64)) * 0.3).astype(np.float32)
    g = Graph()
    y = g.add_node(get("matmul"), [g.add_input(TensorType.of(a), "x"), g.add_const(w)], {})[0]
    y = g.add_node(get("gelu"), [y], {})[0]
    g.set_outputs([y], ["y"])
    cg = compile_graph(g, cache=False)
    assert cg.rules == ["dense"]
    h = a.astype(np.float64) @ w.astype(np.float64)
    assert rel_err(cg(a)[0], REFS["gelu"](h)) <= REL


def test_switch_off_keeps_libm_and_changes_the_cache_key(values, monkeypatch):
    import tvm
    from megtrace.relay_bridge.compile_cache import entry_key
    from megtrace.relay_bridge.executable import BuildOptions
    from megtrace.relay_bridge.targets import host_target
    x = values("erf")
    g = Graph()
    y = g.add_node(get("erf"), [g.add_input(TensorType.of(x), "x")], {})[0]
    g.set_outputs([y], ["y"])
    keys = {}
    for flag in ("0", "1"):
        monkeypatch.setenv(fast_math.ENV, flag)
        assert fast_math.enabled() == (flag == "1")
        keys[flag] = entry_key(g, tvm.target.Target(host_target()), None, BuildOptions())
        _elementwise_ok(compile_graph(g, cache=False)(x)[0], _erf(x.astype(np.float64)))
    assert keys["0"] != keys["1"]


def test_tuned_build_computes_the_fast_forms(rng, monkeypatch, tmp_path):
    """A tuned build (MetaSchedule records + the generic rule) legalizes with the same
    fast_math forms as the rules' build, so a kernel without a record does not fall back
    to one erff call per lane: no libm call in its code, and GELU within REL of float64."""
    import tvm
    from tvm import s_tir
    from megtrace.relay_bridge.executable import build_tuned_executable
    monkeypatch.setenv(fast_math.ENV, "1")
    x = (rng.standard_normal((4, 256)) * 3).astype(np.float32)
    g = Graph()
    y = g.add_node(get("gelu"), [g.add_input(TensorType.of(x), "x")], {})[0]
    g.set_outputs([y], ["y"])
    database = s_tir.meta_schedule.database.JSONDatabase(
        str(tmp_path / "workload.json"), str(tmp_path / "records.json"), allow_missing=True)
    built = build_tuned_executable(g, "llvm", database, "rules")
    (llvm,) = [m for m in built.executable.mod.imports if m.kind == "llvm"]
    assert "erff" not in llvm.inspect_source("asm")
    want = 0.5 * x * (1 + _erf(x.astype(np.float64) / np.sqrt(2)))
    vm = tvm.relax.VirtualMachine(built.executable, tvm.cpu())
    (got,) = [t.numpy() for t in vm["main"](tvm.runtime.tensor(x))]
    _elementwise_ok(got, want, tiny=1e-6 * np.abs(x))    # GELU's tail: as above
