"""F.vision.warp_affine with interp_mode "nearest", "cubic" and "lanczos4" against real
MegEngine 1.13 on CPU (tests/data/make_megengine_warp_affine_modes.py): megdnn's
OpenCV-derived NHWC kernel, float32 within 1e-5, uint8 bit-exact. Eager, traced (the
Relax lowering), dumped as WarpAffine with the imode, read back by load_graph and run by
the real MegEngine Lite; the combinations MegEngine's CPU refuses are refused by name."""
import io
from pathlib import Path

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.autodiff import GradManager
from megtrace.fbs.reader import read_model
from megtrace.graph_io import load_graph
from megtrace.jit import trace

GOLDEN = np.load(Path(__file__).parent / "data" / "megengine_warp_affine_modes.npz")
CASES = sorted(k[2:] for k in GOLDEN.files if k.startswith("y/"))
OUT = tuple(int(v) for v in GOLDEN["out"])
# the traced/dumped subset: every mode and dtype, every border mode once
TRACED = ["uint8_c3_nearest_wrap", "uint8_c1_cubic_constant", "uint8_c3_lanczos4_reflect",
          "float32_c3_nearest_constant", "float32_c3_cubic_replicate",
          "float32_c1_lanczos4_reflect_101"]


def _case(name):
    dtype, channels, imode, border = name.split("_", 3)
    x = GOLDEN[f"x/{dtype}_{channels}"]

    def fn(img, mat):
        return F.vision.warp_affine(img, mat, OUT, border_mode=border,
                                    border_val=float(GOLDEN[f"bval/{dtype}"]),
                                    interp_mode=imode)
    return fn, x, GOLDEN[f"y/{name}"]


def _check(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.uint8:
        np.testing.assert_array_equal(got, want)
    else:
        assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max())


def test_golden_cases_cover_every_mode_and_border():
    assert {c.split("_", 3)[2] for c in CASES} == {"nearest", "cubic", "lanczos4"}
    assert {c.split("_", 3)[3] for c in CASES} == {"constant", "replicate", "reflect",
                                                   "reflect_101", "wrap"}


@pytest.mark.parametrize("name", CASES)
def test_eager_matches_megengine(name):
    fn, x, want = _case(name)
    _check(fn(mge.tensor(x), mge.tensor(GOLDEN["mat"])).numpy(), want)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("warp_affine_modes")
    out = {}
    for name in TRACED:
        fn, x, _ = _case(name)
        traced = trace(symbolic=True, capture_as_const=True)(fn)
        traced(mge.tensor(x), mge.tensor(GOLDEN["mat"]))
        got = traced(mge.tensor(x), mge.tensor(GOLDEN["mat"])).numpy()
        path = tmp / f"{name}.mge"
        traced.dump(str(path), arg_names=["data", "mat"], output_names=["out"])
        out[name] = (path, got)
    return out


@pytest.mark.parametrize("name", TRACED)
def test_traced_matches_megengine(name, dumps):
    _check(dumps[name][1], _case(name)[2])


@pytest.mark.parametrize("name", TRACED)
def test_dump_writes_the_imode_and_reads_back(name, dumps):
    path, _ = dumps[name]
    _, x, want = _case(name)
    warps = [o for o in read_model(path.read_bytes()).oprs if o.type == "WarpAffineV2"]
    assert [o.params[0][1]["imode"] for o in warps] == [name.split("_", 3)[2].upper()]
    (got,) = load_graph(io.BytesIO(path.read_bytes())).run(x, GOLDEN["mat"]).values()
    _check(got, want)


@pytest.fixture(scope="module")
def lite_results(lite, dumps):
    jobs = [(dumps[name][0], {"data": _case(name)[1], "mat": GOLDEN["mat"]})
            for name in TRACED]
    return dict(zip(TRACED, lite.run_models(jobs)))


@pytest.mark.parametrize("name", TRACED)
def test_dump_runs_in_megengine_lite(name, lite_results):
    result = lite_results[name]
    assert not isinstance(result, str), result
    (got,) = result.values()
    _check(got, _case(name)[2])


@pytest.mark.parametrize("shape, dtype, fmt, mode, message", [
    ((1, 3, 9, 11), "float32", "NCHW", "nearest", "needs format 'NHWC'"),
    ((1, 9, 11, 4), "float32", "NHWC", "cubic", "1 to 3 channels"),
    ((1, 9, 11, 3), "float16", "NHWC", "lanczos4", "float32 or uint8"),
    ((1, 9, 11, 3), "float32", "NHWC", "area", "interp_mode must be one of"),
    ((1, 9, 11, 3), "float32", "NHWC", "bicubic", "interp_mode must be one of"),
])
def test_what_megengine_refuses_is_refused_by_name(shape, dtype, fmt, mode, message):
    """MegEngine raises (an AsyncError) for each of these: its NCHW and naive kernels are
    bilinear only, and no kernel has "area" (make_megengine_warp_affine_modes.py)."""
    x = mge.tensor(np.ones(shape, dtype))
    with pytest.raises(ValueError, match=message):
        F.vision.warp_affine(x, mge.tensor(GOLDEN["mat"][:1]), OUT, format=fmt,
                             interp_mode=mode)


def test_non_linear_modes_have_no_gradient():
    img = mge.tensor(np.ones((2, 9, 11, 3), np.float32))
    gm = GradManager().attach([img])
    with pytest.raises(NotImplementedError, match="no gradient for interp_mode 'cubic'"):
        with gm:
            y = F.vision.warp_affine(img, mge.tensor(GOLDEN["mat"]), OUT, interp_mode="cubic")
            gm.backward(y.sum())
