"""One build policy: compile_graph and export go through build_executable, so the
trace's opt_level and graph_opt_config reach an exported library too."""
import json

import numpy as np
import pytest
from conftest import rel_err
from models import MLP

import megtrace as mge
from megtrace.jit import GraphOptimizationConfig, trace
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.executable import BuildOptions, build_executable
from megtrace.relay_bridge.export import export, load_exported

PIPELINE = {0: "plain", 1: "fused", 2: "cpu-rules"}


@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_export_honours_the_traces_opt_level(opt_level, rng, tmp_path):
    net = MLP().eval()
    x = rng.standard_normal((2, 64)).astype(np.float32)
    f = trace(lambda x: net(x), symbolic=True, capture_as_const=True, opt_level=opt_level)
    f(mge.tensor(x))
    done = export(f, tmp_path / "mlp.so")
    assert done.pipeline == PIPELINE[opt_level]
    assert json.loads(done.manifest.read_text())["pipeline"] == PIPELINE[opt_level]
    want = net(mge.tensor(x)).numpy()
    assert rel_err(load_exported(done.library)(x)[0], want) <= 1e-5


def test_fusion_limits_reach_export(rng, tmp_path):
    """graph_opt_config forbidding fused reductions: the rules pipeline still, built
    with the limit (the kernels differ from the unlimited build's)."""
    net = MLP().eval()
    x = rng.standard_normal((2, 64)).astype(np.float32)
    cfg = GraphOptimizationConfig()
    cfg.jit_fuse_reduce = False
    f = trace(lambda x: net(x), symbolic=True, capture_as_const=True, graph_opt_config=cfg)
    f(mge.tensor(x))
    assert f._build_options() == BuildOptions(2, True, False, None)
    done = export(f, tmp_path / "mlp.so")
    assert rel_err(load_exported(done.library)(x)[0], net(mge.tensor(x)).numpy()) <= 1e-5


@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_compile_graph_builds_what_build_executable_builds(opt_level, rng):
    net = MLP().eval()
    x = rng.standard_normal((2, 64)).astype(np.float32)
    f = trace(lambda x: net(x), symbolic=True, capture_as_const=True)
    f(mge.tensor(x))
    options = BuildOptions(opt_level)
    compiled = compile_graph(f.graph, options=options)
    built = build_executable(f.graph.without_shape_inputs(), None, options=options)
    assert compiled.pipeline == built.pipeline == PIPELINE[opt_level]
    assert compiled.kernels == built.kernels


def test_bad_opt_level_is_refused():
    with pytest.raises(ValueError, match="opt_level must be 0..3"):
        build_executable(_tiny_graph(), None,
                         options=BuildOptions(5))


def _tiny_graph():
    from megtrace.ir import Graph, TensorType
    from megtrace.ops import get
    g = Graph()
    x = g.add_input(TensorType((2,), "float32"), "x")
    (y,) = g.add_node(get("relu"), [x], {}, "relu")
    return g.with_outputs([y], ["y"])
