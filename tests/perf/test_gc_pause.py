"""relay_bridge/gc_pause.py: the collector is off during TVM's import and builds, and a
caller's own gc.disable() is never undone by it."""
from __future__ import annotations

import gc

import pytest

from megtrace.relay_bridge.gc_pause import collector_paused


@pytest.fixture(autouse=True)
def _restore_gc():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_collector_is_off_inside_and_back_on_after():
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_comes_back_after_an_error():
    gc.enable()
    with pytest.raises(RuntimeError):
        with collector_paused():
            raise RuntimeError("build failed")
    assert gc.isenabled()


def test_a_callers_disable_stands():
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_build_runs_with_the_collector_off(monkeypatch):
    from megtrace.relay_bridge import executable
    seen = []

    def fake(*_args):
        seen.append(gc.isenabled())
        return "built"
    monkeypatch.setattr(executable, "_untuned_build", fake)
    gc.enable()
    from megtrace.ir import Graph
    assert executable.build_executable(Graph(), "llvm") == "built"
    assert seen == [False] and gc.isenabled()
