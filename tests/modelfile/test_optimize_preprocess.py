"""enable_fuse_preprocess: MegEngine 1.13's passes for it (FuseNCHW4Int8Preprocess,
FuseWarpPerspectiveDimshufflePass) rewrite only uint8/quantized image preprocessing, so a
float model's dump is the plain one with Metadata bit 5 set -- as real MegEngine's dumps
of the same models show (tests/data/make_megengine_layout_models.py). A uint8 image's
WarpPerspective read only by a TypeCvt to float32 becomes one WarpPerspective writing
float32 (relay_bridge/preprocess.py), checked against real MegEngine's dumps of PreNet
(tests/data/make_megengine_hwcd4_preprocess.py)."""
import collections
import io

import numpy as np
import pytest
from conftest import TESTS, rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.fbs.reader import read_model
from megtrace.fbs.to_graph import build_graph
from megtrace.graph_io import load_graph
from megtrace.interpreter import evaluate
from megtrace.jit import trace

from .mge_summary import counts, golden_counts
from .optimize_models import LAYOUT_GOLDEN, dumped, traced

DATA = TESTS / "data" / "megengine_optimize"
HW = TESTS / "data" / "megengine_hwcd4"


@pytest.mark.parametrize("name", ["padnet", "blocknet"])
def test_fuse_preprocess_changes_no_float_opr(name):
    real = LAYOUT_GOLDEN[name]
    assert golden_counts(real["enable_fuse_preprocess"]) == golden_counts(real["none"])
    assert counts(dumped(name, "enable_fuse_preprocess")) == counts(dumped(name, "none"))


@pytest.mark.parametrize("name", ["convnet", "padnet", "blocknet"])
def test_fuse_preprocess_metadata_bit_is_megengines(name):
    real = "convnet2" if name == "convnet" else name
    want = read_model((DATA / f"{real}_enable_fuse_preprocess.mge").read_bytes()) \
        .metadata.optimize_options
    assert want == 1 << 5 | 1 << 6                      # fuse_preprocess, fuse_grain
    assert read_model(dumped(name, "enable_fuse_preprocess")).metadata.optimize_options == want


@pytest.mark.parametrize("name", ["convnet", "padnet"])
def test_fuse_preprocess_dumps_run(name):
    """Ours in load_graph (the Lite run is the plain dump's) and real MegEngine's."""
    _, x, want = traced(name)
    (got,) = load_graph(io.BytesIO(dumped(name, "enable_fuse_preprocess"))).run(x).values()
    assert rel_err(got, want) <= 1e-5
    real = "convnet2" if name == "convnet" else name
    io_ = np.load(DATA / f"{real}_io.npz")
    (got,) = load_graph(DATA / f"{real}_enable_fuse_preprocess.mge").run(io_["data"]).values()
    assert rel_err(got, io_["out"]) <= 1e-5


# -- uint8 WarpPerspective + TypeCvt (FuseWarpPerspectiveDimshufflePass) ----------------------
class PreNet(M.Module):
    """make_megengine_hwcd4_preprocess.py's PreNet; `extra_reader` reads the uint8 warp
    twice (MegEngine then leaves it alone)."""

    def __init__(self, extra_reader: bool = False):
        super().__init__()
        self.conv = M.Conv2d(3, 8, 3, padding=1)
        self.mean = mge.tensor(np.array([103.5, 116.3, 123.7], np.float32).reshape(1, 3, 1, 1))
        self.std = mge.tensor(np.array([57.4, 57.1, 58.4], np.float32).reshape(1, 3, 1, 1))
        self.extra_reader = extra_reader

    def forward(self, data, mat):
        w = F.vision.warp_perspective(data, mat, (16, 16))
        x = (w.astype("float32") - self.mean) / self.std
        y = F.relu(self.conv(x))
        return (y, w) if self.extra_reader else y


_PRE: dict = {}


def _prenet(extra_reader: bool = False):
    """(dumps by option, data, mat, eager output, eager output of the float32 image)."""
    if extra_reader not in _PRE:
        io_ = np.load(HW / "prenet_io.npz")
        data, mat = io_["data"], io_["mat"]
        net = PreNet(extra_reader).eval()
        want = net(mge.tensor(data), mge.tensor(mat))
        unrounded = net(mge.tensor(data.astype(np.float32)), mge.tensor(mat))

        @trace(symbolic=True, capture_as_const=True)
        def infer(data, mat):
            return net(data, mat)
        infer(mge.tensor(data), mge.tensor(mat))
        dumps = {}
        for option in ("none", "enable_fuse_preprocess"):
            buf = io.BytesIO()
            infer.dump(buf, arg_names=["data", "mat"], **({} if option == "none" else
                                                           {option: True}))
            dumps[option] = buf.getvalue()
        first = (lambda t: t[0]) if extra_reader else (lambda t: t)
        _PRE[extra_reader] = (dumps, data, mat, first(want).numpy(), first(unrounded).numpy())
    return _PRE[extra_reader]


def _warps(data: bytes) -> list:
    return [o.output_dtype for o in read_model(data).oprs if o.type == "WarpPerspectiveV2"]


def test_uint8_warp_and_typecvt_fuse_like_megengine():
    """The TypeCvt is gone and the warp writes float32, in ours as in MegEngine's dump."""
    ours = _prenet()[0]
    real = {o: (HW / f"prenet_{o}.mge").read_bytes() for o in ours}
    for dumps in (ours, real):
        before, after = counts(dumps["none"]), counts(dumps["enable_fuse_preprocess"])
        assert before - after == collections.Counter({"TypeCvt -> float32": 1})
        assert after - before == collections.Counter()
        assert _warps(dumps["none"]) == [None]
        assert _warps(dumps["enable_fuse_preprocess"]) == ["float32"]
        assert read_model(dumps["enable_fuse_preprocess"]).metadata.optimize_options == \
            1 << 5 | 1 << 6


def test_warp_with_another_reader_is_not_fused():
    dumps = _prenet(extra_reader=True)[0]
    assert counts(dumps["enable_fuse_preprocess"]) == counts(dumps["none"])
    assert _warps(dumps["enable_fuse_preprocess"]) == [None]


def test_fused_warp_computes_without_rounding():
    """megdnn's fused kernel writes the interpolated values as floats: the fused file
    computes what the model computes on the image cast to float32 first (ours and
    MegEngine's dump, against eager megtrace and eager MegEngine); unfused, the uint8
    rounding stays."""
    dumps, data, mat, want, unrounded = _prenet()
    (got,) = load_graph(io.BytesIO(dumps["enable_fuse_preprocess"])).run(data, mat).values()
    assert rel_err(got, unrounded) <= 1e-5 and rel_err(got, want) > 1e-4
    g = build_graph(read_model(dumps["enable_fuse_preprocess"]))       # the eager kernels
    (got,) = evaluate(g, dict(zip(g.inputs, (data, mat))), g.outputs).values()
    assert rel_err(got, unrounded) <= 1e-5
    (got,) = load_graph(io.BytesIO(dumps["none"])).run(data, mat).values()
    assert rel_err(got, want) <= 1e-5
    io_ = np.load(HW / "prenet_io.npz")
    (got,) = load_graph(HW / "prenet_enable_fuse_preprocess.mge").run(data, mat).values()
    assert rel_err(got, io_["out_unrounded"]) <= 1e-5
    (got,) = load_graph(HW / "prenet_none.mge").run(data, mat).values()
    assert rel_err(got, io_["out"]) <= 1e-5


@pytest.fixture(scope="module")
def lite_prenet(lite, tmp_path_factory):
    dumps, data, mat, _, _ = _prenet()
    tmp = tmp_path_factory.mktemp("prenet")
    jobs = []
    for option, data_bytes in dumps.items():
        (tmp / f"{option}.mge").write_bytes(data_bytes)
        jobs.append((tmp / f"{option}.mge", {"data": data, "mat": mat}))
    jobs.append((HW / "prenet_enable_fuse_preprocess.mge", {"data": data, "mat": mat}))
    return lite.run_models(jobs)


def test_unfused_prenet_runs_in_lite(lite_prenet):
    (got,) = lite_prenet[0].values()
    assert rel_err(got, _prenet()[3]) <= 1e-4


@pytest.mark.xfail(strict=True, reason="MegEngine Lite 1.13's x86 WarpPerspective with uint8 "
                   "input and float32 output writes garbage (values ~1e35), for real "
                   "MegEngine's own fused dump as for ours")
@pytest.mark.parametrize("which", [1, 2])
def test_fused_prenet_in_lite(lite_prenet, which):
    result = lite_prenet[which]
    assert not isinstance(result, str), result
    (got,) = result.values()
    assert rel_err(got, _prenet()[4]) <= 1e-4


def test_real_nhwc_warp_dumps(lite):
    """MegEngine fuses an NHWC uint8 warp, its Dimshuffle to NCHW and the TypeCvt into one
    WarpPerspective (format NHWC_NCHW, float32 out): load_graph computes it as MegEngine
    Lite does (megdnn's naive kernel, no rounding). The unfused dump's NHWC warp is
    megdnn's x86 OpenCV-derived kernel (1/32-pixel coordinates, 2% off a float
    interpolation here): load_graph computes it as MegEngine does eagerly and Lite runs it."""
    io_ = np.load(HW / "prenet_nhwc_io.npz")
    fused = HW / "prenet_nhwc_enable_fuse_preprocess.mge"
    assert [(o.params[0][1]["format"], o.output_dtype) for o in read_model(fused.read_bytes())
            .oprs if o.type == "WarpPerspectiveV2"] == [("NHWC_NCHW", "float32")]
    plain = HW / "prenet_nhwc_none.mge"
    assert [o.params[0][1]["format"] for o in read_model(plain.read_bytes()).oprs
            if o.type == "WarpPerspectiveV2"] == ["NHWC"]
    feeds = {"data": io_["data"], "mat": io_["mat"]}
    (want,), (lite_plain,) = (r.values() for r in lite.run_models([(fused, feeds),
                                                                    (plain, feeds)]))
    (got,) = load_graph(fused).run(io_["data"], io_["mat"]).values()
    assert rel_err(got, want) <= 1e-5
    (got,) = load_graph(plain).run(io_["data"], io_["mat"]).values()
    assert rel_err(got, io_["out"]) <= 1e-5
    assert rel_err(lite_plain, io_["out"]) <= 1e-5


class PreNetNHWC(PreNet):
    """make_megengine_hwcd4_preprocess.py's PreNetNHWC: the warp in NHWC, a Dimshuffle to
    NCHW, then float32."""

    def forward(self, data, mat):
        x = F.vision.warp_perspective(data, mat, (16, 16), format="NHWC")
        x = (x.transpose(0, 3, 1, 2).astype("float32") - self.mean) / self.std
        return F.relu(self.conv(x))


def test_nhwc_warp_dimshuffle_typecvt_fuse_like_megengine():
    """The NHWC warp, its Dimshuffle and the TypeCvt become one NHWC_NCHW warp writing
    float32, in ours as in MegEngine's dump; ours computes what MegEngine's fused dump
    does: the naive kernel on the uint8 image, unrounded (real MegEngine's fused file, as
    Lite runs it: test_real_nhwc_warp_dumps)."""
    io_ = np.load(HW / "prenet_nhwc_io.npz")
    net = PreNetNHWC().eval()

    @trace(symbolic=True, capture_as_const=True)
    def infer(data, mat):
        return net(data, mat)
    infer(mge.tensor(io_["data"]), mge.tensor(io_["mat"]))
    ours = {}
    for option in ("none", "enable_fuse_preprocess"):
        buf = io.BytesIO()
        infer.dump(buf, arg_names=["data", "mat"], **({} if option == "none" else {option: True}))
        ours[option] = buf.getvalue()
    real = {o: (HW / f"prenet_nhwc_{o}.mge").read_bytes() for o in ours}
    for dumps in (ours, real):
        before, after = counts(dumps["none"]), counts(dumps["enable_fuse_preprocess"])
        assert before - after == collections.Counter({
            "WarpPerspective format=NHWC": 1, "Dimshuffle": 1, "TypeCvt -> float32": 1})
        assert after - before == collections.Counter({"WarpPerspective format=NHWC_NCHW": 1})
        assert [(o.params[0][1]["format"], o.output_dtype) for o in
                read_model(dumps["enable_fuse_preprocess"]).oprs
                if o.type == "WarpPerspectiveV2"] == [("NHWC_NCHW", "float32")]
    # fused: the naive kernel on the image as float32 (the NCHW PreNet, same weights)
    nchw = PreNet().eval()
    nchw.load_state_dict(net.state_dict())
    unrounded = nchw(mge.tensor(io_["data"].transpose(0, 3, 1, 2).astype(np.float32)),
                     mge.tensor(io_["mat"])).numpy()
    (got,) = load_graph(io.BytesIO(ours["enable_fuse_preprocess"])).run(
        io_["data"], io_["mat"]).values()
    assert rel_err(got, unrounded) <= 1e-5
    (unfused,) = load_graph(io.BytesIO(ours["none"])).run(io_["data"], io_["mat"]).values()
    assert rel_err(unfused, net(mge.tensor(io_["data"]), mge.tensor(io_["mat"])).numpy()) <= 1e-5
    assert rel_err(got, unfused) > 1e-4      # the unfused NHWC warp's fixed point and rounding
