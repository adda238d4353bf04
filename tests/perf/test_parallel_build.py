"""Kernels built on several threads (relay_bridge/parallel_build.py) compute exactly what
the one-module build computes, run from several LLVM modules, and export as one
library; MEGTRACE_BUILD_THREADS picks the count."""
import numpy as np
import pytest

from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.export import export, load_exported
from megtrace.relay_bridge.parallel_build import build_threads

from .helpers import llvm_modules


def test_outputs_are_bit_identical_to_the_one_module_build(convnet_graph, monkeypatch):
    graph, x, want = convnet_graph
    monkeypatch.setenv("MEGTRACE_EARLY_BUILD", "0")    # modules of its own: test_early_build
    outputs, modules = {}, {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("MEGTRACE_BUILD_THREADS", threads)
        compiled = compile_graph(graph, cache=False)
        outputs[threads] = compiled(x)[0]
        modules[threads] = llvm_modules(compiled.executable.mod)
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
