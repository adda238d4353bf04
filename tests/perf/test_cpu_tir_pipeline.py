"""relay_bridge/cpu_tir_pipeline.py: the rules' kernels lower to the same TIR through
megtrace's trimmed pipeline as through TVM's own less the entry's argument checks, which
are their only asserts (the VM checks main's arguments itself), and only the rules'
builds use it."""
import importlib

import numpy as np
import pytest
import tvm_ffi

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge import parallel_build as pb
from megtrace.relay_bridge._tvm import tvm
from megtrace.relay_bridge.cpu_tir_pipeline import cpu_tir_pipeline
from megtrace.relay_bridge.targets import resolve



class _Mixed(M.Module):
    """A kernel of each rule family: direct and Winograd convs with epilogues, a
    depthwise conv, max pooling, a dense layer and a row-wise softmax."""

    def __init__(self):
        super().__init__()
        self.stem = M.Conv2d(3, 64, 3, padding=1)
        self.bn = M.BatchNorm2d(64)
        self.body = M.Conv2d(64, 64, 3, padding=1)
        self.dw = M.Conv2d(64, 64, 3, padding=1, groups=64)
        self.fc = M.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        y = F.relu(self.bn(self.stem(x)))
        y = F.relu(self.body(y) + y)
        y = F.max_pool2d(F.relu(self.dw(y)), 2)
        return F.softmax(self.fc(F.flatten(y, 1)), axis=1)


@pytest.fixture
def built_kernels(rng, monkeypatch):
    """(compiled graph, [(TIR module, tirx pipeline name)] each parallel build handed
    its threads)."""
    monkeypatch.setenv("MEGTRACE_BUILD_THREADS", "2")
    monkeypatch.setenv("MEGTRACE_WINOGRAD", "all")
    seen = []
    build_parts = pb._build_parts

    def recording(t, tir_mod, tgt, threads, jit, tir_pipeline, *early):
        seen.append((tir_mod, tir_pipeline))
        return build_parts(t, tir_mod, tgt, threads, jit, tir_pipeline, *early)
    monkeypatch.setattr(pb, "_build_parts", recording)
    x = rng.standard_normal((1, 3, 14, 14)).astype(np.float32)
    net = _Mixed().eval()
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True, record_only=True)
    f(mge.tensor(x))
    return f.graph, x, seen


def _lowered(function, gv, attrs, tgt, pipeline: str):
    """`function` through tirx.build's steps before code generation, as one module."""
    t = tvm()
    build = importlib.import_module("tvm.tirx.build")
    with tgt, t.transform.PassContext(opt_level=3):
        lower, finalize_host, _ = t.tirx.get_tir_pipeline(pipeline)
        mod = t.tirx.transform.BindTarget(tgt.with_host(tgt))(
            t.IRModule({gv: function}, attrs=attrs))
        host, devices = build.split_host_device_mods(lower(mod))
        assert not devices
        return finalize_host()(host)


def test_the_rules_kernels_lower_as_through_tvms_pipeline(built_kernels, monkeypatch):
    """Less stack_tiles.py's annotation too (switched off here; test_stack_tiles.py)."""
    from megtrace.relay_bridge import stack_tiles
    monkeypatch.setattr(stack_tiles, "TILE_BYTES", 0)
    graph, x, seen = built_kernels
    compiled = compile_graph(graph, cache=False)
    assert {"conv", "winograd", "depthwise", "dense"} <= set(compiled.rules), compiled.rules
    np.testing.assert_allclose(compiled(x)[0].sum(), 1.0, rtol=1e-5)   # softmax row
    (tir_mod, pipeline), = seen
    assert pipeline == cpu_tir_pipeline()
    tgt = resolve(None)
    assert len(tir_mod.functions) >= 6
    skip_asserts = tvm().tirx.transform.SkipAssert()
    for gv, function in tir_mod.functions.items():
        ours = _lowered(function, gv, tir_mod.attrs, tgt, pipeline)
        tvms = _lowered(function, gv, tir_mod.attrs, tgt, "default")
        assert "assert" in tvms.script()                  # TVM's argument checks
        assert "assert" not in ours.script(), gv.name_hint
        assert tvm_ffi.structural_equal(ours, skip_asserts(tvms)), gv.name_hint


def test_the_only_asserts_are_the_entrys_argument_checks(built_kernels):
    """What the trimmed pipeline drops: every assert TVM's pipeline leaves in a rules'
    build kernel comes before its compute scope (MakePackedAPI's checks of the
    arguments), none from the kernel itself."""
    graph, _, seen = built_kernels
    compile_graph(graph, cache=False)
    (tir_mod, _), = seen
    tgt = resolve(None)
    for gv, function in tir_mod.functions.items():
        lines = _lowered(function, gv, tir_mod.attrs, tgt, "default").script().splitlines()
        scope = next(i for i, line in enumerate(lines) if '"compute_scope"' in line)
        checks = [i for i, line in enumerate(lines) if line.lstrip().startswith("assert ")]
        assert checks and max(checks) < scope, gv.name_hint


def test_wrong_arguments_are_still_refused_by_the_vm(built_kernels):
    graph, x, _ = built_kernels
    compiled = compile_graph(graph, cache=False)
    assert compiled.pipeline == "cpu-rules"
    for bad in (x[..., :-1], x.astype(np.float64), np.concatenate([x, x])):
        with pytest.raises((RuntimeError, ValueError), match="Check failed"):
            compiled(bad)


def test_tvms_default_path_keeps_tvms_pipeline(built_kernels):
    graph, x, seen = built_kernels
    compiled = compile_graph(graph, rules=False, cache=False)
    assert compiled.pipeline == "default"
    assert [name for _, name in seen] == ["default"]
    np.testing.assert_allclose(compiled(x)[0].sum(), 1.0, rtol=1e-5)
