"""Kernels built on several threads (relay_bridge/parallel_build.py) compute exactly what
the one-module build computes, run from several LLVM modules, and export as one
library; MEGTRACE_BUILD_THREADS picks the count."""
import numpy as np
import pytest
from models import ConvNet

import megtrace as mge
from megtrace.jit import trace
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.export import export, load_exported
from megtrace.relay_bridge.parallel_build import build_threads


def _modules(mod):
    yield mod
    for sub in mod.imports:
        yield from _modules(sub)


def _llvm_modules(executable) -> int:
    return sum(m.kind == "llvm" for m in _modules(executable.mod))


@pytest.fixture
def convnet_graph(rng):
    net = ConvNet().eval()
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True, record_only=True)
    f(mge.tensor(x))
    return f.graph, x, net(mge.tensor(x)).numpy()


def test_outputs_are_bit_identical_to_the_one_module_build(convnet_graph, monkeypatch):
    graph, x, want = convnet_graph
    monkeypatch.setenv("MEGTRACE_EARLY_BUILD", "0")    # modules of its own: test_early_build
    outputs, modules = {}, {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("MEGTRACE_BUILD_THREADS", threads)
        compiled = compile_graph(graph, cache=False)
        outputs[threads] = compiled(x)[0]
        modules[threads] = _llvm_modules(compiled.executable)
    assert len(compiled.kernels) >= 3            # conv, pool, dense: several kernels
    assert modules == {"1": 1, "2": 2, "3": 3}
    np.testing.assert_array_equal(outputs["2"], outputs["1"])
    np.testing.assert_array_equal(outputs["3"], outputs["1"])
    np.testing.assert_allclose(outputs["1"], want, rtol=1e-4, atol=1e-5)


def test_a_parallel_build_exports_as_one_library(convnet_graph, monkeypatch, tmp_path):
    graph, x, want = convnet_graph
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "2")
    done = export(graph, tmp_path / "net.so")
    np.testing.assert_allclose(load_exported(done.library)(x)[0], want, rtol=1e-4,
                               atol=1e-5)


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "3")
    assert build_threads() == 3
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "0")
    assert build_threads() == 1
    monkeypatch.delenv("MEGTRACE_BUILD_THREADS")
    assert 1 <= build_threads() <= 4
