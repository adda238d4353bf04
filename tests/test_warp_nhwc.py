"""F.vision.warp_perspective(format="NHWC") against real MegEngine 1.13 on CPU
(tests/data/make_megengine_warp_nhwc.py): float32/uint8 images of 1 to 3 channels take
megdnn's OpenCV-derived x86 kernel (1/32-pixel coordinates; uint8 bit-exact), 4 channels
the naive one. Eager, traced (the Relax lowering), dumped as WarpPerspective format NHWC,
read back by load_graph and run by the real MegEngine Lite."""
import io
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.autodiff import GradManager
from megtrace.fbs.reader import read_model
from megtrace.graph_io import load_graph
from megtrace.ir import TensorType
from megtrace.jit import trace
from megtrace.ops import get

GOLDEN = np.load(Path(__file__).parent / "data" / "megengine_warp_nhwc.npz")
CASES = sorted({k.split("/")[0] for k in GOLDEN.files})
# the traced/dumped subset: both kernels, every dtype, every border mode once
TRACED = ["uint8_c1_WRAP", "uint8_c3_CONSTANT", "uint8_c3_wide", "uint8_c4_REFLECT",
          "float32_c1_REFLECT_101", "float32_c3_REPLICATE", "float32_c4_CONSTANT"]


def _case(name):
    g = {k.split("/")[1]: GOLDEN[k] for k in GOLDEN.files if k.startswith(name + "/")}
    border = "REPLICATE" if name.endswith("wide") else name.split("_", 2)[2]
    return g, border


def _warp(g, border):
    def fn(x, mat, idx):
        return F.vision.warp_perspective(x, mat, tuple(int(v) for v in g["out"]), mat_idx=idx,
                                         border_mode=border.lower(),
                                         border_val=float(g["bval"]), format="NHWC")
    return fn


def _args(g):
    return mge.tensor(g["x"]), mge.tensor(g["mat"]), mge.tensor(g["idx"])


def _check(got, g, compiled: bool = False):
    """uint8 bit-exact, except the naive kernel's compiled: its float32 coordinates, as
    LLVM contracts them, may round a tap weight differently (a +-1 here and there)."""
    want = g["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.uint8 and compiled and g["x"].shape[3] > 3:
        diff = np.abs(got.astype(np.int32) - want)
        assert diff.max() <= 1 and (diff > 0).mean() <= 0.005
    elif want.dtype == np.uint8:
        np.testing.assert_array_equal(got, want)
    else:
        assert rel_err(got, want) <= 1e-5


def test_golden_data_needs_the_fixed_point():
    """The OpenCV kernel's results are not a float interpolation's: exact coordinates
    (the naive kernel, format NHWC_NCHW here) miss MegEngine's uint8 outputs."""
    g, border = _case("uint8_c3_REFLECT")
    exact = F.vision.warp_perspective(mge.tensor(g["x"].transpose(0, 3, 1, 2)),
                                      mge.tensor(g["mat"]), tuple(g["out"]),
                                      mat_idx=mge.tensor(g["idx"]), border_mode=border)
    assert (exact.numpy().transpose(0, 2, 3, 1) != g["y"]).mean() > 0.2


@pytest.mark.parametrize("name", CASES)
def test_eager_matches_megengine(name):
    g, border = _case(name)
    _check(_warp(g, border)(*_args(g)).numpy(), g)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("warp_nhwc")
    out = {}
    for name in TRACED:
        g, border = _case(name)
        traced = trace(symbolic=True, capture_as_const=True)(_warp(g, border))
        got = traced(*_args(g)).numpy()
        path = tmp / f"{name}.mge"
        traced.dump(str(path), arg_names=["data", "mat", "idx"], output_names=["out"])
        out[name] = (path, got)
    return out


@pytest.mark.parametrize("name", TRACED)
def test_traced_matches_megengine(name, dumps):
    _check(dumps[name][1], _case(name)[0], compiled=True)


@pytest.mark.parametrize("name", TRACED)
def test_dump_is_an_nhwc_warp_and_reads_back(name, dumps):
    path, _ = dumps[name]
    g, border = _case(name)
    warps = [o for o in read_model(path.read_bytes()).oprs if o.type == "WarpPerspectiveV2"]
    assert [(o.params[0][1]["format"], o.params[0][1]["bmode"]) for o in warps] == \
        [("NHWC", border)]
    (got,) = load_graph(io.BytesIO(path.read_bytes())).run(g["x"], g["mat"], g["idx"]).values()
    _check(got, g, compiled=True)


@pytest.fixture(scope="module")
def lite_results(lite, dumps):
    jobs = []
    for name in TRACED:
        g, _ = _case(name)
        jobs.append((dumps[name][0], {"data": g["x"], "mat": g["mat"], "idx": g["idx"]}))
    return dict(zip(TRACED, lite.run_models(jobs)))


@pytest.mark.parametrize("name", TRACED)
def test_dump_runs_in_megengine_lite(name, lite_results):
    result = lite_results[name]
    assert not isinstance(result, str), result
    (got,) = result.values()
    _check(got, _case(name)[0], compiled=True)


def test_nhwc_refuses_a_fused_dtype_and_has_no_gradient():
    op = get("warp_perspective")
    x, mat = TensorType((1, 4, 4, 3), "uint8"), TensorType((1, 3, 3), "float32")
    with pytest.raises(ValueError, match="needs format NCHW or NHWC_NCHW"):
        op.infer(x, mat, out=(2, 2), border="REPLICATE", border_val=0.0, dtype="float32",
                 format="NHWC")
    assert op.infer(x, mat, out=(2, 5), border="REPLICATE", border_val=0.0,
                    format="NHWC").shape == (1, 2, 5, 3)
    img = mge.tensor(np.ones((1, 4, 4, 3), np.float32))
    gm = GradManager().attach([img])
    with pytest.raises(NotImplementedError, match="no gradient in format NHWC"):
        with gm:
            y = F.vision.warp_perspective(img, mge.tensor(np.eye(3, dtype=np.float32)[None]),
                                          (2, 2), format="NHWC")
            gm.backward(y.sum())
