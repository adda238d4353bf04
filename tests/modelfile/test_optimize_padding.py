"""enable_nchw88 / enable_nchw44 / enable_nchw44_dot on layers the zoo models do not have:
channel counts that are not multiples of the pack (MegEngine's PaddingChannelPass,
megtrace.relay_bridge.padding_channel, tested alone here) and blocked AdaptivePooling /
Resize / Concat. Checked against real MegEngine 1.13's dumps of the same models
(tests/layout_models.py; tests/data/make_megengine_layout_models.py), run in the real
MegEngine Lite 1.13, and real MegEngine's dumps read back with load_graph."""
import collections

import numpy as np
import pytest
import lite_runtime
from conftest import TESTS, rel_err

from megtrace.fbs.reader import read_model
from megtrace.fbs.to_graph import build_graph
from megtrace.graph_io import load_graph
from megtrace.interpreter import evaluate
from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.relay_bridge.padding_channel import pad_channels, padding

from .mge_summary import counts, golden_counts
from .optimize_models import LAYOUT_GOLDEN, dumped, traced

DATA = TESTS / "data" / "megengine_optimize"
LAYOUTS = ["enable_nchw88", "enable_nchw44", "enable_nchw44_dot"]
MODELS = ["padnet", "blocknet"]


# -- the pass alone ------------------------------------------------------------------------
def _odd_graph(rng) -> Graph:
    g = Graph()
    x = g.add_input(TensorType((1, 3, 6, 6), "float32"), "x")
    c = lambda *s: g.add_const(rng.normal(size=s).astype(np.float32))  # noqa: E731
    (a,) = g.add_node(get("conv_bias"), [x, c(5, 3, 3, 3), c(1, 5, 1, 1)],
                      {"padding": (1, 1), "nonline": "RELU"})
    (d,) = g.add_node(get("conv2d"), [a, c(5, 1, 1, 3, 3)], {"padding": (1, 1)})   # depthwise
    (e,) = g.add_node(get("conv_bias"), [d, c(6, 5, 1, 1), c(1, 6, 1, 1)], {})
    (f,) = g.add_node(get("add"), [e, e])                                  # both padded
    (h,) = g.add_node(get("mul"), [f, c(1, 6, 1, 1)])                     # cut back
    g.set_outputs([h, a], ["y", "a"])
    return g


@pytest.mark.parametrize("pack", [8, 4])
def test_padding_pass_alone(pack, rng):
    g = _odd_graph(rng)
    new = pad_channels(g, pack)
    weights = [new.consts[n.inputs[1]].shape for n in new.nodes
               if n.op.name in ("conv2d", "conv_bias")]
    up = lambda c: c + padding(c, pack)  # noqa: E731
    # output channels padded; input channels only after a padded layer (never the image)
    assert weights == [(up(5), 3, 3, 3), (up(5), 1, 1, 3, 3), (up(6), up(5), 1, 1)]
    ops = collections.Counter(n.op.name for n in new.nodes)
    assert ops["subtensor"] == 2          # before the mul by a 6-channel constant, output a
    assert [str(v.type) for v in new.outputs] == [str(v.type) for v in g.outputs]
    x = rng.normal(size=(1, 3, 6, 6)).astype(np.float32)
    want = evaluate(g, {g.inputs[0]: x}, g.outputs)
    got = evaluate(new, {new.inputs[0]: x}, new.outputs)
    for a, b in zip(new.outputs, g.outputs):
        assert rel_err(got[a], want[b]) <= 1e-6


def test_grouped_convolution_is_never_padded(rng):
    g = Graph()
    x = g.add_input(TensorType((1, 3, 6, 6), "float32"), "x")
    w1 = g.add_const(rng.normal(size=(6, 3, 1, 1)).astype(np.float32))
    w2 = g.add_const(rng.normal(size=(2, 4, 3, 1, 1)).astype(np.float32))
    (a,) = g.add_node(get("conv2d"), [x, w1], {})
    (b,) = g.add_node(get("conv2d"), [a, w2], {})
    g.set_outputs([b], ["y"])
    new = pad_channels(g, 8)
    assert [n.op.name for n in new.nodes] == ["conv2d", "subtensor", "conv2d"]
    assert new.consts[new.nodes[2].inputs[1]].shape == (2, 4, 3, 1, 1)


# -- against real MegEngine's dumps --------------------------------------------------------
def _float_oprs(c: collections.Counter) -> dict:
    """Counts of the oprs computing on float data (megtrace writes shape arithmetic and
    the relayouts' target shapes statically: those int32 oprs are left out)."""
    skip = ("ImmutableTensor -> int32", "GetVarShape", "Concat", "Elemwise mode=MUL",
            "Subtensor", "Elemwise mode=FLOOR_DIV")
    return {k: n for k, n in c.items() if not k.startswith(skip)}


def _weights(data: bytes) -> list:
    return sorted(t.shape for o in read_model(data).oprs if o.type != "Host2DeviceCopy"
                  for t in o.tensors if len(t.shape) >= 4)


def _golden_weights(entry) -> list:
    return sorted(tuple(o[1][0]) for o in entry["oprs"]
                  if o[0] == "ImmutableTensor" and len(o[1][0]) >= 4)


@pytest.mark.parametrize("option", ["enable_fuse_conv_bias_nonlinearity"] + LAYOUTS)
@pytest.mark.parametrize("name", MODELS)
def test_layout_models_match_megengine(name, option):
    """Same float oprs with the same formats, the same padded and blocked weight and bias
    shapes, the same cuts (Subtensor on float data) as real MegEngine's dump."""
    entry = LAYOUT_GOLDEN[name][option]
    ours, real = counts(dumped(name, option)), golden_counts(entry)
    assert _float_oprs(ours) == _float_oprs(real)
    assert _weights(dumped(name, option)) == _golden_weights(entry)
    cuts = [o[1][0] for o in entry["oprs"] if o[0] == "Subtensor" and len(o[1][0]) == 4]
    graph = build_graph(read_model(dumped(name, option)))
    ours_cuts = [list(n.outputs[0].type.shape) for n in graph.nodes
                 if n.op.name == "subtensor" and n.inputs[0].type.ndim == 4]
    assert ours_cuts == cuts == ([[1, 10, 8, 8]] if name == "padnet" and option in LAYOUTS
                                 else [])


# -- running the files ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def lite_padding(lite, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("padding")
    jobs, keys = [], []
    for name in MODELS:
        for option in LAYOUTS:
            path = tmp / f"{name}_{option}.mge"
            path.write_bytes(dumped(name, option))
            jobs.append((path, {"data": traced(name)[1]}))
            keys.append((name, option))
    return dict(zip(keys, lite.run_models(jobs)))


@pytest.mark.parametrize("option", LAYOUTS)
@pytest.mark.parametrize("name", MODELS)
def test_padded_and_blocked_dumps_run_in_lite(lite_padding, name, option):
    result = lite_padding[name, option]
    lite_runtime.xfail_if_hung_in_its_jit(result)
    assert not isinstance(result, str), result
    (got,) = result.values()
    assert rel_err(got, traced(name)[2]) <= 1e-4


@pytest.mark.parametrize("option", ["none", "enable_fuse_conv_bias_nonlinearity"] + LAYOUTS)
@pytest.mark.parametrize("name", MODELS)
def test_real_layout_dumps_run_in_load_graph(name, option):
    io_ = np.load(DATA / f"{name}_io.npz")
    (got,) = load_graph(DATA / f"{name}_{option}.mge").run(io_["data"]).values()
    assert rel_err(got, io_["out"]) <= 1e-5


# -- the conv net's other options, against real MegEngine's dumps of it ---------------------
CONVNET_REAL = ["enable_nchw44_dot", "enable_nchw4", "enable_nchw32", "enable_chwn4",
                "enable_nchw64", "enable_fuse_preprocess", "enable_io16xc32+enable_nchw88"]


@pytest.mark.parametrize("option", ["enable_nchw44_dot", "enable_io16xc32+enable_nchw88"])
def test_convnet_options_match_megengine(option):
    """nchw44_dot writes NCHW44 on float graphs; float16 then NCHW88 (float16 weights,
    compute_mode=FLOAT32 in the blocked ConvBias)."""
    entry = LAYOUT_GOLDEN["convnet"][option]
    ours, real = counts(dumped("convnet", option)), golden_counts(entry)
    assert _float_oprs(ours) == _float_oprs(real)
    assert _weights(dumped("convnet", option)) == _golden_weights(entry)


@pytest.mark.parametrize("option", CONVNET_REAL)
def test_convnet_real_dumps_metadata_and_load_graph(option):
    """Real MegEngine's dumps with each option: ours carry the same optimize_options bits,
    and load_graph reproduces MegEngine's output (float16 storage: 1e-2)."""
    path = DATA / f"convnet2_{option}.mge"
    assert read_model(dumped("convnet", option)).metadata.optimize_options == \
        read_model(path.read_bytes()).metadata.optimize_options
    io_ = np.load(DATA / "convnet2_io.npz")
    (got,) = load_graph(path).run(io_["data"]).values()
    assert rel_err(got, io_["out"]) <= (1e-2 if "16" in option else 1e-5)
