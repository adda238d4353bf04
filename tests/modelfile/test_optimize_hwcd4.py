"""optimize_for_inference's enable_hwcd4: MegEngine's NHWCD4 image layout (ConvertFormatPass,
megtrace.relay_bridge.nhwcd4), tested alone, against real MegEngine 1.13's dumps of the conv
net, ResNet-18-like and MobileNetV2-like models (tests/data/megengine_optimize/convnet2_*,
tests/data/megengine_hwcd4/, made by make_megengine_layout_models.py and
make_megengine_hwcd4_preprocess.py), and run in the real MegEngine Lite 1.13.

MegEngine Lite 1.13 on x86 runs NHWCD4 ConvBias and Pooling, but refuses a plain
Convolution in NHWCD4 ("invalid conv format 2", dnn fallback convolution): real
MegEngine's own ResNet/MobileNet hwcd4 dumps (which have such convolutions) fail there,
and so do megtrace's (the same oprs)."""
import collections
import io

import numpy as np
import pytest
from conftest import TESTS, rel_err

from megtrace.fbs.reader import read_model
from megtrace.graph_io import load_graph
from megtrace.interpreter import evaluate
from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.ops.nhwcd4 import from_cd4, to_cd4, weight_from_cd4, weight_to_cd4
from megtrace.relay_bridge.nhwcd4 import convert_to_nhwcd4

from .mge_summary import counts
from .optimize_models import LAYOUT_GOLDEN, MODELS, dumped, traced

OPT = TESTS / "data" / "megengine_optimize"
HW = TESTS / "data" / "megengine_hwcd4"
REAL = {"convnet": (OPT / "convnet2_enable_hwcd4.mge", OPT / "convnet2_io.npz"),
        "resnet": (HW / "resnet_enable_hwcd4.mge", HW / "resnet_io.npz"),
        "mobilenet_v2": (HW / "mobilenet_v2_enable_hwcd4.mge", HW / "mobilenet_v2_io.npz")}
BITS = 2 << 32 | 1 << 6                   # LayoutTransform NHWCD4, fuse_grain


def _real(name: str) -> bytes:
    return REAL[name][0].read_bytes()


# -- layouts and the pass alone --------------------------------------------------------------
def test_layouts_are_megdnns(rng):
    """dnn relayout_format.cpp: activations (N, H, C/4, W, 4) padded with zeros; dense
    filters (OC/4, FH, FW, round_up(IC, 4), 4), grouped (G, OCg/4, FH, FW, ICg, 4),
    depthwise (G/4, 1, FH, FW, 4)."""
    x = rng.normal(size=(2, 3, 5, 6)).astype(np.float32)
    y = to_cd4(x)
    assert y.shape == (2, 5, 1, 6, 4)
    assert y[1, 2, 0, 4, 1] == x[1, 1, 2, 4] and (y[..., 3] == 0).all()
    assert (from_cd4(y)[:, :3] == x).all()
    w = rng.normal(size=(8, 3, 3, 3)).astype(np.float32)
    wd = weight_to_cd4(w, "dense")
    assert wd.shape == (2, 3, 3, 4, 4) and wd[1, 2, 0, 1, 3] == w[7, 1, 2, 0]
    assert (weight_from_cd4(wd, "dense")[:, :3] == w).all()
    wg = rng.normal(size=(2, 4, 3, 3, 3)).astype(np.float32)
    assert weight_to_cd4(wg, "group")[1, 0, 2, 1, 2, 3] == wg[1, 3, 2, 2, 1]
    assert (weight_from_cd4(weight_to_cd4(wg, "group"), "group") == wg).all()
    wc = rng.normal(size=(8, 1, 1, 3, 3)).astype(np.float32)
    assert weight_to_cd4(wc, "channel")[1, 0, 2, 0, 3] == wc[7, 0, 0, 2, 0]
    assert (weight_from_cd4(weight_to_cd4(wc, "channel"), "channel") == wc).all()


def _small_graph(rng) -> Graph:
    g = Graph()
    x = g.add_input(TensorType((1, 3, 10, 10), "float32"), "x")
    c = lambda *s: g.add_const(rng.normal(size=s).astype(np.float32))  # noqa: E731
    (a,) = g.add_node(get("conv_bias"), [x, c(8, 3, 3, 3), c(1, 8, 1, 1)],
                      {"padding": (1, 1), "nonline": "RELU"})            # dense, IC 3 -> 4
    (b,) = g.add_node(get("conv2d"), [a, c(8, 1, 1, 3, 3)], {"padding": (1, 1)})   # channel
    (d,) = g.add_node(get("conv_bias"), [b, c(8, 8, 1, 1), c(1, 8, 1, 1)], {})     # dense
    (e,) = g.add_node(get("fuse_add_relu"), [d, a])                       # residual
    (f,) = g.add_node(get("conv2d"), [e, c(2, 4, 4, 3, 3)], {})           # group 4 | 4
    (h,) = g.add_node(get("conv2d"), [e, c(6, 8, 1, 1)], {})              # OC 6: NCHW
    (p,) = g.add_node(get("pool2d"), [e], {"mode": "max", "kernel": (2, 2), "stride": (2, 2)})
    (r,) = g.add_node(get("reshape"), [p], {"shape": (1, -1)})
    g.set_outputs([r, f, h], ["flat", "grouped", "narrow"])
    return g


def test_nhwcd4_pass_alone(rng):
    g = _small_graph(rng)
    new = convert_to_nhwcd4(g)
    ops = collections.Counter(n.op.name for n in new.nodes)
    assert {k: ops[k] for k in ("conv_bias_nhwcd4", "conv2d_nhwcd4", "pool2d_nhwcd4",
                                "fuse_add_relu", "conv2d")} == \
        {"conv_bias_nhwcd4": 2, "conv2d_nhwcd4": 2, "pool2d_nhwcd4": 1, "fuse_add_relu": 1,
         "conv2d": 1}
    modes = collections.Counter(n.kwargs["mode"] for n in new.nodes
                                if n.op.name == "relayout_format")
    # the image in; back to NCHW for the reshape, the grouped output and the narrow conv
    assert modes == {"NCHW_NHWCD4I": 1, "NHWCD4I_NCHW": 3}
    assert [str(v.type) for v in new.outputs] == [str(v.type) for v in g.outputs]
    x = rng.normal(size=(1, 3, 10, 10)).astype(np.float32)
    want = evaluate(g, {g.inputs[0]: x}, g.outputs)
    got = evaluate(new, {new.inputs[0]: x}, new.outputs)
    for a, b in zip(new.outputs, g.outputs):
        assert rel_err(got[a], want[b]) <= 1e-5


def test_depthwise_conv_of_the_image_stays_nchw(rng):
    """One output channel per group: MegEngine converts a depthwise convolution only when
    its input is NHWCD4 already."""
    g = Graph()
    x = g.add_input(TensorType((1, 4, 6, 6), "float32"), "x")
    w = g.add_const(rng.normal(size=(4, 1, 1, 3, 3)).astype(np.float32))
    (y,) = g.add_node(get("conv2d"), [x, w], {})
    g.set_outputs([y], ["y"])
    assert [n.op.name for n in convert_to_nhwcd4(g).nodes] == ["conv2d"]


# -- against real MegEngine's dumps ---------------------------------------------------------
def _formats(c: collections.Counter) -> set:
    return {k.split(" format=")[1].split(" ")[0] for k in c
            if " format=" in k and k.startswith(("Conv", "Pooling"))}


def _layout_oprs(c: collections.Counter) -> dict:
    return {k: n for k, n in c.items() if k.startswith(("RelayoutFormat", "Pooling"))}


def _image_tensors(data: bytes, weights_only: bool) -> list:
    """(shape, align axis) of the Image2DPack4 constants (all in one holder)."""
    holders = [o for o in read_model(data).oprs if o.type == "MultipleDeviceTensorWithFormatHolder"]
    assert len(holders) == 1
    out = [(t.shape, t.image_axis) for t in holders[0].tensors]
    if weights_only:       # the biases (axis 2) differ where BatchNorm folds differently
        out = [s for s in out if s[1] != 2]
    return sorted(out)


@pytest.mark.parametrize("name", MODELS)
def test_hwcd4_matches_megengine(name):
    """Every convolution and pooling in NHWCD4 in both files, the same RelayoutFormat
    oprs (one in, one out), pooling and filter layouts (shapes and Image2DPack4 align
    axes); opr for opr, with the same Image2DPack4 constants (filters, biases, the
    constants Elemwise oprs add to NHWCD4 values)."""
    data, real_data = dumped(name, "enable_hwcd4"), _real(name)
    ours, real = counts(data), counts(real_data)
    assert _formats(ours) == _formats(real) == {"NHWCD4"}
    base = counts(dumped(name, "enable_fuse_conv_bias_nonlinearity"))
    conv_pool = ("Conv", "Pooling")
    assert sum(n for k, n in ours.items() if k.startswith(conv_pool)) == \
        sum(n for k, n in base.items() if k.startswith(conv_pool))
    assert _layout_oprs(ours) == _layout_oprs(real)
    assert _image_tensors(data, True) == _image_tensors(real_data, True)
    assert ours == real
    assert _image_tensors(data, False) == _image_tensors(real_data, False)


def test_odd_channels_are_not_padded_and_stay_nchw():
    """MegEngine's PaddingChannelPass pads nothing for NHWCD4: PadNet (6 and 10 channels, a
    depthwise convolution of an NCHW input, grouped 10 -> 12) keeps every opr NCHW, as in
    MegEngine's dump of it."""
    real = counts((OPT / "padnet_enable_hwcd4.mge").read_bytes())
    ours = counts(dumped("padnet", "enable_hwcd4"))
    assert ours == counts(dumped("padnet", "enable_fuse_conv_bias_nonlinearity"))
    assert not any(k.startswith(("RelayoutFormat", "MultipleDeviceTensorWithFormatHolder"))
                   or "NHWCD4" in k for k in real)
    assert _layout_oprs(ours) == _layout_oprs(real)
    _, x, want = traced("padnet")
    (got,) = load_graph(io.BytesIO(dumped("padnet", "enable_hwcd4"))).run(x).values()
    assert rel_err(got, want) <= 1e-5


def test_oprs_megengine_fails_on_get_nchw_inputs():
    """MegEngine hands an NHWCD4 value to AdaptivePooling/Resize as it is and then fails
    (BlockNet); megtrace relayouts it back to NCHW first and computes the model."""
    assert "IMAGE2D_PACK4" in LAYOUT_GOLDEN["blocknet"]["enable_hwcd4"]["error"]
    data = dumped("blocknet", "enable_hwcd4")
    assert counts(data)["RelayoutFormat mode=NHWCD4I_NCHW"] >= 1
    _, x, want = traced("blocknet")
    (got,) = load_graph(io.BytesIO(data)).run(x).values()
    assert rel_err(got, want) <= 1e-5


@pytest.mark.parametrize("name", MODELS)
def test_hwcd4_metadata_bits_are_megengines(name):
    assert read_model(_real(name)).metadata.optimize_options == BITS
    assert read_model(dumped(name, "enable_hwcd4")).metadata.optimize_options == BITS


@pytest.mark.parametrize("name", MODELS)
def test_load_graph_reproduces_real_hwcd4_dumps(name):
    io_ = np.load(REAL[name][1])
    (got,) = load_graph(REAL[name][0]).run(io_["data"]).values()
    assert rel_err(got, io_["out"]) <= 1e-5


@pytest.mark.parametrize("name", MODELS)
def test_hwcd4_dump_runs_in_load_graph(name):
    _, x, want = traced(name)
    (got,) = load_graph(io.BytesIO(dumped(name, "enable_hwcd4"))).run(x).values()
    assert rel_err(got, want) <= 1e-5


# -- running the files in MegEngine Lite ------------------------------------------------------
@pytest.fixture(scope="module")
def lite_hwcd4(lite, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hwcd4")
    jobs, keys = [], []
    for name in MODELS:
        path = tmp / f"{name}.mge"
        path.write_bytes(dumped(name, "enable_hwcd4"))
        jobs.append((path, {"data": traced(name)[1]}))
        keys.append(("ours", name))
        jobs.append((REAL[name][0], {"data": np.load(REAL[name][1])["data"]}))
        keys.append(("real", name))
    return dict(zip(keys, lite.run_models(jobs)))


def _plain_nhwcd4_convs(data: bytes) -> int:
    return sum(n for k, n in counts(data).items()
               if k.startswith("ConvolutionForward format=NHWCD4"))


@pytest.mark.parametrize("who", ["ours", "real"])
@pytest.mark.parametrize("name", MODELS)
def test_hwcd4_dump_in_lite(lite_hwcd4, who, name):
    """Lite runs the file within 1e-4 of eager float32 when every convolution is a ConvBias;
    a plain NHWCD4 Convolution is refused by Lite's x86 kernels, in MegEngine's own dumps
    as in ours."""
    data = dumped(name, "enable_hwcd4") if who == "ours" else _real(name)
    want = traced(name)[2] if who == "ours" else np.load(REAL[name][1])["out"]
    result = lite_hwcd4[who, name]
    if _plain_nhwcd4_convs(data):
        assert isinstance(result, str) and "invalid conv format 2" in result
        return
    assert not isinstance(result, str), result
    (got,) = result.values()
    assert rel_err(got, want) <= 1e-4


@pytest.mark.parametrize("name", MODELS)
def test_plain_nhwcd4_convolutions_where_megengine_has_them(name):
    """Ours have them exactly where MegEngine's own dumps do (ResNet's downsampling, the
    zoo MobileNetV2's unbiased ConvBn convolutions), and the conv net has none: Lite runs
    at least that file in the test above."""
    assert _plain_nhwcd4_convs(dumped(name, "enable_hwcd4")) == _plain_nhwcd4_convs(_real(name))
    assert not _plain_nhwcd4_convs(dumped("convnet", "enable_hwcd4"))


def test_fbs_v1_refuses_image_constants(tmp_path):
    """FBS (V1) tensors have no format field: the hwcd4 file is FBS_V2 only, refused
    clearly and nothing written."""
    path = tmp_path / "x.mge"
    with pytest.raises(NotImplementedError, match="Image2DPack4.*FBS_V2 only"):
        traced("convnet")[0].dump(path, arg_names=["data"], enable_hwcd4=True,
                                  dump_format="FBS")
    assert not path.exists()
