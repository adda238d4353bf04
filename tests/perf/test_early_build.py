"""The rules' kernels built while the lowering goes on (relay_bridge/early_build.py): the
linked modules compute exactly what the ordinary build computes, a kernel changed after
it was offered is never linked, and a failed early build is built again with the rest."""
import time

import numpy as np
import pytest

from megtrace.relay_bridge import compile_graph, early_build, executable
from megtrace.relay_bridge._tvm import tvm
from megtrace.relay_bridge.cpu.primfunc import mark
from megtrace.relay_bridge.early_build import EarlyBuilds
from megtrace.relay_bridge.parallel_build import build_context, build_module
from megtrace.relay_bridge.targets import resolve

from .helpers import llvm_modules


@pytest.fixture
def fresh_stats(monkeypatch):
    for key in early_build.stats:               # in place: parallel_build counts there too
        monkeypatch.setitem(early_build.stats, key, 0)
    return early_build.stats


def _wait_idle(builds: EarlyBuilds) -> None:
    deadline = time.monotonic() + 120
    while builds._busy and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.fixture
def everything_early(monkeypatch):
    """`take` only once the worker has built every kernel offered: without it, how many
    kernels the worker reaches before the lowering ends depends on the machine's load."""
    take = EarlyBuilds.take

    def patient_take(self, functions):
        _wait_idle(self)
        return take(self, functions)
    monkeypatch.setattr(EarlyBuilds, "take", patient_take)


def test_early_modules_are_linked_and_compute_bit_identical_outputs(
        convnet_graph, monkeypatch, fresh_stats, everything_early):
    graph, x, want = convnet_graph
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "2")
    monkeypatch.setenv("MEGTRACE_EARLY_BUILD", "0")
    ordinary = compile_graph(graph, cache=False)
    assert fresh_stats["offered"] == 0
    monkeypatch.setenv("MEGTRACE_EARLY_BUILD", "1")
    early = compile_graph(graph, cache=False)
    rules = sum(k.startswith(("conv", "pool", "dense", "reduce")) for k in early.kernels)
    assert rules >= 3                                 # conv, pool, dense at least
    assert fresh_stats["offered"] >= 3
    assert fresh_stats["linked"] == fresh_stats["offered"]
    assert fresh_stats["dropped"] == fresh_stats["returned"] == 0
    assert llvm_modules(early.executable.mod) > llvm_modules(ordinary.executable.mod)
    np.testing.assert_array_equal(early(x)[0], ordinary(x)[0])
    np.testing.assert_allclose(early(x)[0], want, rtol=1e-4, atol=1e-5)


def test_a_failed_early_build_is_built_again_with_the_rest(convnet_graph, monkeypatch,
                                                           fresh_stats, everything_early):
    graph, x, want = convnet_graph
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "2")

    def broken(functions):
        raise RuntimeError("LLVM fell over")
    monkeypatch.setattr(executable, "_early_builds", lambda tgt, pipe: EarlyBuilds(broken))
    compiled = compile_graph(graph, cache=False)
    assert compiled.pipeline == "cpu-rules"           # not the default path's fallback
    assert fresh_stats["offered"] >= 3
    assert fresh_stats["dropped"] == fresh_stats["offered"]
    assert fresh_stats["linked"] == 0
    np.testing.assert_allclose(compiled(x)[0], want, rtol=1e-4, atol=1e-5)


def _kernel(n: int, scale: float):
    t = tvm()
    x = t.te.placeholder((n,), "float32", name="x")
    y = t.te.compute((n,), lambda i: x[i] * scale, name="y")
    return t.te.create_prim_func([x, y]).without_attr("global_symbol")


def _rule_kernel(n: int, scale: float):
    return mark(_kernel(n, scale), "test_scale")


def test_only_kernels_unchanged_since_offered_are_taken(fresh_stats):
    tgt = resolve(None)
    context = build_context()
    builds = EarlyBuilds(lambda fs: build_module(fs, tgt, context, True, "default"))
    try:
        builds.offer("scale", _rule_kernel(64, 2.0))
        builds.offer("plain", _kernel(64, 2.0))          # not a rule kernel: never built
        _wait_idle(builds)
        final = _rule_kernel(64, 2.0).with_attr("global_symbol", "scale")
        changed = _rule_kernel(64, 3.0).with_attr("global_symbol", "scale")
        assert builds.take({"scale": changed}) == []
        assert fresh_stats == {"offered": 1, "linked": 0, "dropped": 1, "returned": 0}
        fresh_stats["dropped"] = 0
        (future, names), = builds.take({"scale": final})
    finally:
        builds.close()
    assert names == ["scale"]
    a = np.arange(64, dtype=np.float32)
    out = np.empty_like(a)
    t = tvm()
    x, y = t.runtime.tensor(a), t.runtime.tensor(out)
    future.result()["scale"](x, y)
    np.testing.assert_array_equal(y.numpy(), a * 2)


def test_off_for_one_build_thread_and_by_the_environment(monkeypatch):
    tgt = resolve(None)
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "1")
    assert executable._early_builds(tgt, "default") is None
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "2")
    monkeypatch.setenv("MEGTRACE_EARLY_BUILD", "off")
    assert executable._early_builds(tgt, "default") is None
    monkeypatch.setenv("MEGTRACE_EARLY_BUILD", "1")
    builds = executable._early_builds(tgt, "default")
    assert builds is not None
    builds.close()
