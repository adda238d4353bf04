"""optimize_for_inference's layout options: enable_nchw88 (x86 AVX) and enable_nchw44 /
enable_nchw44_dot (ARM) re-lay-out the graph (megtrace.relay_bridge.nchwxx, tested
alone here); enable_fuse_conv_bias_with_z and the CUDA layouts nchw4/nchw32/chwn4/nchw64
only fuse conv+bias on float graphs, as real MegEngine 1.13 does (enable_hwcd4:
test_optimize_hwcd4.py).
Checked against real MegEngine's dumps of the same models
(tests/data/megengine_optimize_options.json) and run in the real MegEngine Lite 1.13."""
import collections
import io

import numpy as np
import pytest
import lite_runtime
from conftest import TESTS, rel_err

from megtrace.fbs.reader import read_model
from megtrace.graph_io import load_graph
from megtrace.interpreter import evaluate
from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.relay_bridge.nchwxx import convert_to_nchwxx

from .mge_summary import counts, golden_counts
from .optimize_models import GOLDEN, MODELS, batch_of, dumped, traced

DATA = TESTS / "data" / "megengine_optimize"
BLOCKED = ["enable_nchw88", "enable_nchw44", "enable_nchw44_dot", "enable_nchw44+enable_nchw88"]
BIAS_ONLY = ["enable_fuse_conv_bias_with_z", "enable_nchw4", "enable_nchw32", "enable_chwn4"]
BITS = {"enable_nchw88": 3 << 32, "enable_nchw44": 4 << 32, "enable_nchw44_dot": 5 << 32,
        "enable_nchw44+enable_nchw88": 4 << 32, "enable_fuse_conv_bias_with_z": 1 << 3,
        "enable_nchw4": 1 << 32, "enable_nchw32": 6 << 32, "enable_chwn4": 7 << 32}


# -- the pass alone ------------------------------------------------------------------------
def _small_graph(rng) -> Graph:
    g = Graph()
    x = g.add_input(TensorType((1, 3, 10, 10), "float32"), "x")
    c = lambda *s: g.add_const(rng.normal(size=s).astype(np.float32))  # noqa: E731
    (a,) = g.add_node(get("conv_bias"), [x, c(8, 3, 3, 3), c(1, 8, 1, 1)],
                      {"padding": (1, 1), "nonline": "RELU"})            # hybrid
    (b,) = g.add_node(get("conv2d"), [a, c(8, 1, 1, 3, 3)], {"padding": (1, 1)})   # channel
    (d,) = g.add_node(get("conv_bias"), [b, c(8, 8, 1, 1), c(1, 8, 1, 1)], {})     # dense
    (e,) = g.add_node(get("fuse_add_relu"), [d, a])                       # residual
    (f,) = g.add_node(get("conv2d"), [e, c(2, 4, 4, 3, 3)], {})           # group 4 | 4
    (p,) = g.add_node(get("pool2d"), [e], {"mode": "max", "kernel": (2, 2), "stride": (2, 2)})
    (r,) = g.add_node(get("reshape"), [p], {"shape": (1, -1)})
    g.set_outputs([r, f], ["flat", "grouped"])
    return g


@pytest.mark.parametrize("pack", [8, 4])
def test_nchwxx_pass_alone(pack, rng):
    g = _small_graph(rng)
    new = convert_to_nchwxx(g, pack)
    ops = collections.Counter(n.op.name for n in new.nodes)
    want = {"conv_bias_nchwxx": 2, "conv2d_nchwxx": 2 if pack == 4 else 1,
            "pool2d_nchwxx": 1, "fuse_add_relu": 1}
    assert {k: ops[k] for k in want} == want
    if pack == 8:      # 4 channels per group: the grouped conv stays NCHW
        assert ops["conv2d"] == 1
    shapes = {n.op.name: n.outputs[0].type.shape for n in new.nodes}
    assert shapes["conv_bias_nchwxx"] == (1, 8 // pack, 10, 10, pack)
    assert [str(v.type) for v in new.outputs] == [str(v.type) for v in g.outputs]
    x = rng.normal(size=(1, 3, 10, 10)).astype(np.float32)
    want_out = evaluate(g, {g.inputs[0]: x}, g.outputs)
    got = evaluate(new, {new.inputs[0]: x}, new.outputs)
    for a, b in zip(new.outputs, g.outputs):
        assert rel_err(got[a], want_out[b]) <= 1e-5


def test_nchw44_hybrid_follows_megengine_rules(rng):
    """NCHW44's first convolution stays NCHW unless its kernel is square 2/3/5/7 with equal
    strides (dnn's nchw_nchwxx_valid<NCHW44_FP32>); NCHW88 takes any."""
    g = Graph()
    x = g.add_input(TensorType((1, 3, 8, 8), "float32"), "x")
    w = g.add_const(rng.normal(size=(8, 3, 1, 3)).astype(np.float32))
    (y,) = g.add_node(get("conv2d"), [x, w], {})
    g.set_outputs([y], ["y"])
    assert [n.op.name for n in convert_to_nchwxx(g, 4).nodes] == ["conv2d"]
    assert "conv2d_nchwxx" in [n.op.name for n in convert_to_nchwxx(g, 8).nodes]


# -- against real MegEngine's dumps --------------------------------------------------------
def _float_oprs(c: collections.Counter) -> dict:
    """Counts of the oprs that compute on float data (shape arithmetic and constants,
    which megtrace writes statically, left out)."""
    return {k: n for k, n in c.items() if not k.startswith(
        ("ImmutableTensor", "GetVarShape", "Subtensor", "Concat", "Elemwise mode=MUL"))}


def _formats(c: collections.Counter) -> dict:
    out: collections.Counter = collections.Counter()
    for k, n in c.items():
        if " format=" in k and k.startswith(("Conv", "Pooling")):
            out[k.split(" ")[0].replace("ConvolutionForward", "Conv").replace(
                "ConvBiasForward", "Conv") + " " + k.split(" format=")[1].split(" ")[0]] += n
    return dict(out)


def _blocked_weights(data: bytes) -> list:
    shapes = [o.tensors[0].shape for o in read_model(data).oprs if o.tensors]
    return sorted(s for s in shapes if len(s) >= 5 and not (s[0] == 1 and s[2:4] == (1, 1)))


def _golden_blocked_weights(entry) -> list:
    shapes = [tuple(o[1][0]) for o in entry["oprs"] if o[0] == "ImmutableTensor"]
    return sorted(s for s in shapes if len(s) >= 5 and not (s[0] == 1 and s[2:4] == (1, 1)))


@pytest.mark.parametrize("option", BLOCKED)
@pytest.mark.parametrize("name", MODELS)
def test_blocked_layout_matches_megengine(name, option):
    """Every convolution and pooling in the blocked format in both files, with the same
    blocked weight shapes, and the same relayouts at the edges."""
    ours, real = counts(dumped(name, option)), golden_counts(GOLDEN[name][option])
    fmt = "NCHW88" if option == "enable_nchw88" else "NCHW44"
    assert set(k.split(" ")[1] for k in _formats(ours)) == {fmt}
    assert set(k.split(" ")[1] for k in _formats(real)) == {fmt}
    base, real_base = (counts(dumped(name, "enable_fuse_conv_bias_nonlinearity")),
                       golden_counts(GOLDEN[name]["enable_fuse_conv_bias_nonlinearity"]))
    assert sum(_formats(ours).values()) == sum(_formats(base).values())
    assert sum(_formats(real).values()) == sum(_formats(real_base).values())
    assert _blocked_weights(dumped(name, option)) == _golden_blocked_weights(GOLDEN[name][option])
    for sig in ("Dimshuffle", "Reshape", "RelayoutFormat"):
        assert ours[sig] - base[sig] == real[sig] - real_base[sig], sig
    assert _float_oprs(ours) == _float_oprs(real)


@pytest.mark.parametrize("option", BLOCKED + BIAS_ONLY)
def test_layout_metadata_bits_are_megengines(option):
    bits = BITS[option] | 1 << 6                                    # fuse_grain, on by default
    assert read_model(dumped("convnet", option)).metadata.optimize_options == bits
    if (DATA / f"convnet_{option}.mge").exists():
        assert read_model((DATA / f"convnet_{option}.mge").read_bytes()) \
            .metadata.optimize_options == bits


@pytest.mark.parametrize("option", BIAS_ONLY)
@pytest.mark.parametrize("name", MODELS)
def test_bias_only_options_fuse_like_megengine(name, option):
    """On float graphs these options are MegEngine's conv-bias fusion and nothing else."""
    real = GOLDEN[name]
    assert real[option]["counts"] == real["enable_fuse_conv_bias_nonlinearity"]["counts"]
    assert counts(dumped(name, option)) == counts(dumped(name,
                                                         "enable_fuse_conv_bias_nonlinearity"))


def test_nchw64_refuses_grouped_convolutions_like_megengine():
    assert "only support padding channel in dense convolution" in \
        GOLDEN["mobilenet_v2"]["enable_nchw64"]["error"]
    with pytest.raises(NotImplementedError, match="only support padding channel in dense"):
        dumped("mobilenet_v2", "enable_nchw64")
    assert counts(dumped("resnet", "enable_nchw64")) == \
        counts(dumped("resnet", "enable_fuse_conv_bias_nonlinearity"))


# -- running the files ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def lite_layouts(lite, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layouts")
    jobs, keys = [], []
    for name in MODELS:
        for option in ("enable_nchw88", "enable_nchw44", "enable_fuse_conv_bias_with_z"):
            path = tmp / f"{name}_{option}.mge"
            path.write_bytes(dumped(name, option))
            for batch in (1, 3):     # the file keeps any batch size, as MegEngine's does
                x = traced(name)[1] if batch == 1 else batch_of(name, batch)[0]
                jobs.append((path, {"data": x}))
                keys.append((name, option, batch))
    return dict(zip(keys, lite.run_models(jobs)))


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("option", ["enable_nchw88", "enable_nchw44",
                                    "enable_fuse_conv_bias_with_z"])
@pytest.mark.parametrize("name", MODELS)
def test_layout_dump_runs_in_lite(lite_layouts, name, option, batch):
    result = lite_layouts[name, option, batch]
    lite_runtime.xfail_if_hung_in_its_jit(result)
    assert not isinstance(result, str), result
    (got,) = result.values()
    want = traced(name)[2] if batch == 1 else batch_of(name, batch)[1]
    assert rel_err(got, want) <= 1e-4


@pytest.mark.parametrize("option", ["enable_nchw88", "enable_nchw44",
                                    "enable_fuse_conv_bias_with_z"])
def test_layout_dumps_run_in_load_graph(option):
    """Ours and real MegEngine's (the conv net: hybrid convolution, blocked pooling)."""
    io_ = np.load(DATA / "convnet_io.npz")
    (got,) = load_graph(DATA / f"convnet_{option}.mge").run(io_["data"]).values()
    assert rel_err(got, io_["out"]) <= 1e-5
    _, x, want = traced("convnet")
    (got,) = load_graph(io.BytesIO(dumped("convnet", option))).run(x).values()
    assert rel_err(got, want) <= 1e-5
