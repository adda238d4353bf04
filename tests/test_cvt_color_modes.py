"""F.vision.cvt_color's uint8-only modes (the YUV420 ones, RGBA2GRAY, uint8 RGB2YUV and
YUV2RGB) against real MegEngine 1.13 on CPU (tests/data/make_megengine_cvt_color.py),
bit-exact: eager, traced (the Relax lowering), dumped as CvtColor, read back by
load_graph and run by the real MegEngine Lite."""
import io
from pathlib import Path

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.errors import ShapeError
from megtrace.fbs.reader import read_model
from megtrace.graph_io import load_graph
from megtrace.jit import trace

GOLDEN = np.load(Path(__file__).parent / "data" / "megengine_cvt_color.npz")
MODES = sorted(k[2:] for k in GOLDEN.files if k.startswith("y/"))
# the traced/dumped subset: each YUV420 layout and formula once, and the other modes
DUMPED = ["YUV2GRAY_YV12", "YUV2RGB_NV21", "YUV2BGR_YU12", "BT601_YUV2RGB_NV12",
          "BT601_YUV2BGR_YV12", "RGBA2GRAY", "RGB2YUV", "YUV2RGB"]


def _input(mode):
    if mode in ("RGB2YUV", "YUV2RGB"):
        return GOLDEN["x/rgb"]
    return GOLDEN["x/rgba"] if mode == "RGBA2GRAY" else GOLDEN["x/yuv420"]


def _check(got, mode):
    want = GOLDEN[f"y/{mode}"]
    assert got.dtype == want.dtype == np.uint8 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_golden_cases_cover_every_yuv420_mode():
    layouts = ("NV21", "NV12", "YV12", "YU12")
    kinds = ("YUV2GRAY", "YUV2RGB", "YUV2BGR", "BT601_YUV2RGB", "BT601_YUV2BGR")
    assert {f"{k}_{lay}" for k in kinds for lay in layouts} <= set(MODES)


@pytest.mark.parametrize("mode", MODES)
def test_eager_matches_megengine(mode):
    _check(F.vision.cvt_color(mge.tensor(_input(mode)), mode).numpy(), mode)


@pytest.mark.parametrize("mode", MODES)
def test_traced_matches_megengine(mode):
    fn = trace(symbolic=True)(lambda x: F.vision.cvt_color(x, mode))
    fn(mge.tensor(_input(mode)))
    _check(fn(mge.tensor(_input(mode))).numpy(), mode)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cvt_color")
    out = {}
    for mode in DUMPED:
        traced = trace(symbolic=True, capture_as_const=True)(
            lambda x, mode=mode: F.vision.cvt_color(x, mode))
        traced(mge.tensor(_input(mode)))
        path = tmp / f"{mode}.mge"
        traced.dump(str(path), arg_names=["data"], output_names=["out"])
        out[mode] = path
    return out


@pytest.mark.parametrize("mode", DUMPED)
def test_dump_is_a_cvt_color_and_reads_back(mode, dumps):
    data = dumps[mode].read_bytes()
    oprs = [o for o in read_model(data).oprs if o.type == "CvtColor"]
    assert [o.params[0][1]["mode"] for o in oprs] == [mode]
    (got,) = load_graph(io.BytesIO(data)).run(_input(mode)).values()
    _check(got, mode)


@pytest.mark.parametrize("mode", DUMPED)
def test_dump_runs_in_megengine_lite(mode, dumps, lite):
    (got,) = lite.run_model(dumps[mode], {"data": _input(mode)}).values()
    _check(got, mode)


@pytest.mark.parametrize("mode, shape, error, message", [
    ("YUV2RGB_NV21", (1, 10, 8, 1), ShapeError, "a multiple of 3"),
    ("YUV2RGB_YV12", (1, 9, 8, 1), ShapeError, "a multiple of 6"),
    ("YUV2GRAY_NV12", (1, 9, 7, 1), ShapeError, "even width"),
    ("BT601_YUV2BGR_NV12", (1, 9, 8, 3), ShapeError, "1 channels"),
])
def test_bad_yuv420_shapes_are_refused_by_name(mode, shape, error, message):
    """MegEngine asserts `ic == 1 && ih % 3 == 0 && iw % 2 == 0` (ih % 6 for YV12/YU12)."""
    with pytest.raises(error, match=message):
        F.vision.cvt_color(mge.tensor(np.zeros(shape, np.uint8)), mode)


@pytest.mark.parametrize("mode, shape", [("YUV2RGB_NV12", (1, 9, 8, 1)),
                                         ("RGBA2GRAY", (1, 2, 2, 4))])
def test_float_input_to_uint8_modes_is_refused(mode, shape):
    """megdnn has uint8 kernels only: "There is not a cvt_opr ... to deal with float"."""
    with pytest.raises(TypeError, match="not supported"):
        F.vision.cvt_color(mge.tensor(np.zeros(shape, np.float32)), mode)
