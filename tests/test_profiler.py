"""megtrace.utils.profiler: the Chrome trace holds the ops that ran, scopes as begin/end
pairs and, for traced functions, each compiled run with its TVM kernels inside it."""
import json
import os

import numpy as np
import pytest

import megtrace.functional as F
from megtrace import tensor
from megtrace.jit import trace
from megtrace.utils.profiler import (Profiler, is_profiling, merge_trace_events, profile,
                                     scope)


def events(directory) -> list:
    with open(os.path.join(directory, f"{os.getpid()}.chrome_timeline.json")) as f:
        return json.load(f)["traceEvents"]


def test_eager_ops_and_scopes(tmp_path):
    x = tensor(np.ones((2, 3), "float32"))
    with Profiler(str(tmp_path)):
        with scope("outer"):
            y = F.relu(x * 2)
        F.sum(y)
    ev = events(tmp_path)
    assert ev[0]["name"] == "Metadata"
    ops = [e["name"] for e in ev if e.get("cat") == "op"]
    assert ops == ["mul", "relu", "reduce"]
    mul = next(e for e in ev if e["name"] == "mul")
    assert mul["args"]["input_shapes"][0] == [2, 3] and mul["dur"] >= 0
    scopes = [(e["name"], e["ph"]) for e in ev if e.get("cat") == "scope"]
    assert scopes == [("outer", "B"), ("outer", "E")]
    begin, end = [e["ts"] for e in ev if e.get("cat") == "scope"]
    assert begin <= mul["ts"] <= end


def test_traced_runs_show_compiled_graph_and_kernels(tmp_path):
    @trace(symbolic=True)
    def f(x):
        return F.relu(F.matmul(x, x)) + 1

    x = tensor(np.ones((8, 8), "float32"))
    f(x)
    with Profiler(str(tmp_path)):
        f(x)
        f(x)
    ev = events(tmp_path)
    runs = [e for e in ev if e.get("cat") == "compiled_graph"]
    assert [e["name"] for e in runs] == ["f", "f"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert kernels and all(k["dur"] >= 0 for k in kernels)
    for k in kernels:      # each kernel lies inside one compiled run
        assert any(r["ts"] <= k["ts"] <= r["ts"] + r["dur"] + 1 for r in runs)


def test_decorator_and_profile_helper(tmp_path):
    @Profiler(str(tmp_path))
    def run():
        return F.exp(tensor([0.0]))

    run()
    assert [e["name"] for e in events(tmp_path) if e.get("cat") == "op"] == ["exp"]
    assert isinstance(profile(str(tmp_path)), Profiler)


def test_is_profiling_while_a_profiler_runs(tmp_path):
    assert is_profiling() is False          # MegEngine 1.13: is_profiling() -> False
    with Profiler(str(tmp_path)):
        assert is_profiling() is True
    assert is_profiling() is False


def test_refusals(tmp_path):
    with pytest.raises(NotImplementedError, match="memory_flow.svg"):
        Profiler(str(tmp_path), format="memory_flow.svg")
    with pytest.raises(AssertionError, match="unsupported format"):
        Profiler(str(tmp_path), format="trace.txt")
    with Profiler(str(tmp_path / "a")):
        with pytest.raises(AssertionError, match="running already"):
            Profiler(str(tmp_path / "b")).start()


def test_merge_trace_events(tmp_path):
    for pid, local in ((11, 1000.0), (12, 1500.0)):
        (tmp_path / f"{pid}.chrome_timeline.json").write_text(json.dumps({"traceEvents": [
            {"name": "Metadata", "ph": "M", "args": {"localTime": local}},
            {"name": "op", "ph": "X", "ts": 10.0, "dur": 1.0}]}))
    merge_trace_events(str(tmp_path))
    merged = json.loads((tmp_path / "merge.chrome_timeline.json").read_text())["traceEvents"]
    assert sorted(e["ts"] for e in merged if e["name"] == "op") == [10.0, 510.0]


def test_with_scopes_brackets_builtin_modules(tmp_path):
    import megtrace.module as M

    class Net(M.Module):          # a user module: no scope of its own, as in MegEngine
        def __init__(self):
            super().__init__()
            self.fc = M.Linear(3, 2)

        def forward(self, x):
            return F.relu(self.fc(x))

    net = Net()
    call = M.Module.__call__
    with Profiler(str(tmp_path), with_scopes=True):
        net(tensor(np.ones((1, 3), "float32")))
    assert M.Module.__call__ is call              # restored
    ev = events(tmp_path)
    scopes = [(e["name"], e["ph"]) for e in ev if e.get("cat") == "scope"]
    assert scopes == [("Linear", "B"), ("Linear", "E")]
    begin, end = [e["ts"] for e in ev if e.get("cat") == "scope"]
    matmul = [e for e in ev if e.get("cat") == "op" and e["name"] == "matmul"]
    assert matmul and begin <= matmul[0]["ts"] <= end
