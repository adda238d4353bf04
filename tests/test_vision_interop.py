"""Image functionals (interpolate in every mode, warp_perspective/affine, remap,
cvt_color, roi_align, sliding_window): traced, dumped as the oprs real MegEngine writes,
run by the real MegEngine Lite 1.13, read back by megtrace, and checked against eager
results and golden outputs of real MegEngine (tests/data/make_megengine_vision.py)."""
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace

GOLDEN = np.load(Path(__file__).parent / "data" / "megengine_vision.npz")

IMG = (2, 3, 5, 7)
MAT = np.array([[[0.9, 0.1, 0.5], [-0.1, 1.1, -0.3], [0.01, -0.02, 1.0]],
                [[1.2, 0.0, -1.0], [0.05, 0.8, 1.5], [0.0, 0.03, 1.0]]], np.float32)
ROIS = np.array([[0, 0.5, 1.0, 5.5, 4.0], [1, 2.0, 0.0, 6.0, 3.5]], np.float32)
MAP = np.random.default_rng(3).uniform(-2, 8, size=(2, 4, 6, 2)).astype(np.float32)

# name -> (function of the image, MegEngine opr types its dump must contain)
CASES = {
    "nearest": (lambda x: F.vision.interpolate(x, size=(9, 4), mode="nearest"), {"ResizeV2"}),
    "bilinear_scale": (lambda x: F.vision.interpolate(x, scale_factor=1.7), {"ResizeV2"}),
    "bicubic": (lambda x: F.vision.interpolate(x, size=(8, 11), mode="bicubic"), {"ResizeV2"}),
    "align_corners": (lambda x: F.nn.interpolate(x, size=(9, 11), align_corners=True),
                      {"WarpPerspectiveV2"}),
    "linear": (lambda x: F.vision.interpolate(x[:, :, 0], 11, mode="linear"), {"ResizeV2"}),
    "warp_perspective": (lambda x: F.vision.warp_perspective(
        x, mge.tensor(MAT), (6, 8), border_mode="reflect"), {"WarpPerspectiveV2"}),
    "warp_constant": (lambda x: F.vision.warp_perspective(
        x, mge.tensor(MAT), (6, 8), border_mode="constant", border_val=0.5),
        {"WarpPerspectiveV2"}),
    "remap": (lambda x: F.vision.remap(x, mge.tensor(MAP), border_mode="wrap"), {"RemapV1"}),
    "warp_affine": (lambda x: F.vision.warp_affine(
        x, mge.tensor(MAT[:, :2]), (4, 6), border_mode="constant", border_val=0.5,
        format="NCHW"), {"WarpAffineV2"}),
    "warp_affine_nhwc": (lambda x: F.vision.warp_affine(x, mge.tensor(MAT[:, :2]), (4, 6)),
                         {"WarpAffineV2"}),
    "cvt_color": (lambda x: F.vision.cvt_color(x[:, :, :, :3], "RGB2YUV"), {"CvtColor"}),
    "roi_align": (lambda x: F.vision.roi_align(x, mge.tensor(ROIS), (2, 3)), {"ROIAlignV1"}),
    "roi_align_no_samples": (lambda x: F.vision.roi_align(x, mge.tensor(ROIS), (2, 3),
                                                          sample_points=0), {"ROIAlignV1"}),
    "sliding_window": (lambda x: F.sliding_window(x, 3, padding=1, stride=(2, 1)),
                       {"Images2Neibs"}),
    "sliding_window_transpose": (lambda x: F.sliding_window_transpose(
        F.sliding_window(x, 2, stride=1), (5, 7), 2), {"SlidingWindowTranspose"}),
    "cross_entropy": (lambda x: F.nn.cross_entropy(
        F.flatten(x, 2), mge.tensor((np.arange(70) % 3).reshape(2, 35).astype(np.int32)),
        reduction="none"), {"IndexingOneHot"}),
    "one_hot": (lambda x: F.one_hot(F.argmax(x[:, :, 0], axis=1), 3), {"IndexingSetOneHot"}),
}


def _dump(fn, x, path, **kw):
    traced = trace(symbolic=True, capture_as_const=True)(fn)
    traced(mge.tensor(x))
    traced.dump(path, arg_names=["data"], output_names=["out"], **kw)
    return traced


@pytest.mark.parametrize("name", CASES, ids=str)
@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "plain"])
def test_dump_writes_megengine_oprs_and_reads_back(name, optimize, rng, tmp_path):
    from megtrace.fbs.reader import read_model
    fn, oprs = CASES[name]
    x = rng.uniform(-1, 1, size=IMG).astype(np.float32)
    path = tmp_path / "m.mge"
    traced = _dump(fn, x, path, optimize_for_inference=optimize)
    types = {o.type for o in read_model(path.read_bytes()).oprs}
    assert oprs <= types, types
    want = fn(mge.tensor(x)).numpy()
    assert rel_err(traced(mge.tensor(x)).numpy(), want) <= 1e-5
    assert rel_err(mge.load_graph(path)(mge.tensor(x)).numpy(), want) <= 1e-5


@pytest.mark.lite
@pytest.mark.parametrize("name", CASES, ids=str)
def test_dump_runs_in_megengine_lite(name, lite, rng, tmp_path):
    fn, _ = CASES[name]
    x = rng.uniform(-1, 1, size=IMG).astype(np.float32)
    path = tmp_path / "m.mge"
    _dump(fn, x, path)
    outs = lite.run_model(path, {"data": x})
    assert rel_err(outs["out"], fn(mge.tensor(x)).numpy()) <= 1e-5


def _golden(name):
    ins = [GOLDEN[f"{name}.in{i}"] for i in range(3) if f"{name}.in{i}" in GOLDEN]
    return [mge.tensor(a) for a in ins], GOLDEN[f"{name}.out0"]


GOLDEN_CALLS = {
    **{f"resize_{m}_{k}": (lambda x, m=m, k=k: F.vision.interpolate(
        x, scale_factor=1.7, mode=m) if k == "scale" else F.vision.interpolate(
        x, {"down": (3, 4), "up": (9, 11), "odd": (7, 5), "tiny": (3, 2)}[k], mode=m))
       for m in ("nearest", "bilinear", "bicubic")
       for k in ("down", "up", "odd", "tiny", "scale")},
    "resize_col_mean": lambda x: F.vision.interpolate(x, (1, 1)),
    "align_bilinear": lambda x: F.vision.interpolate(x, (9, 11), align_corners=True),
    "align_bilinear_down": lambda x: F.vision.interpolate(x, (3, 4), align_corners=True),
    "linear": lambda x: F.vision.interpolate(x, 11, mode="linear"),
    "linear_align": lambda x: F.vision.interpolate(x, 11, mode="linear", align_corners=True),
    "linear_scale": lambda x: F.vision.interpolate(x, scale_factor=2.5, mode="linear"),
    **{f"warp_persp_{b}": (lambda x, m, b=b: F.vision.warp_perspective(
        x, m, (6, 8), border_mode=b, border_val=0.5))
       for b in ("replicate", "constant", "reflect", "reflect_101", "wrap")},
    **{f"remap_{b}": (lambda x, m, b=b: F.vision.remap(x, m, border_mode=b, scalar=0.5))
       for b in ("replicate", "constant", "reflect", "reflect_101", "wrap")},
    "warp_persp_u8": lambda x, m: F.vision.warp_perspective(x, m, (7, 4)),
    "warp_persp_idx": lambda x, m, i: F.vision.warp_perspective(x, m, (4, 9), mat_idx=i),
    "remap_nearest": lambda x, m: F.vision.remap(x, m, interp_mode="nearest"),
    **{f"warp_affine_{b}": (lambda x, m, b=b: F.vision.warp_affine(
        x, m, (6, 8), border_mode=b, border_val=0.5, format="NCHW"))
       for b in ("replicate", "constant", "reflect", "reflect_101", "wrap")},
    "warp_affine_nhwc": lambda x, m: F.vision.warp_affine(x, m, (6, 8)),
    **{f"cvt_{m}": (lambda x, m=m: F.vision.cvt_color(x, mode=m))
       for m in ("RGB2GRAY", "BGR2GRAY", "RGB2YUV", "YUV2RGB", "GRAY2RGB")},
    "cvt_u8_RGB2GRAY": lambda x: F.vision.cvt_color(x, mode="RGB2GRAY"),
    "roi_align_avg": lambda x, r: F.vision.roi_align(x, r, (3, 4), spatial_scale=0.5),
    "roi_align_max": lambda x, r: F.vision.roi_align(
        x, r, (2, 3), mode="max", spatial_scale=0.75, sample_points=(3, 2), aligned=False),
    "roi_pooling_max": lambda x, r: F.vision.roi_pooling(x, r, (3, 2), scale=0.5),
    "roi_pooling_avg": lambda x, r: F.vision.roi_pooling(x, r, 3, mode="average", scale=0.7),
    "dpsroi_trans": lambda x, r, t: F.deformable_psroi_pooling(x, r, t, False, 3, 3, 3, 4,
                                                               0.25, 0.1),
    "dpsroi_no_trans": lambda x, r, t: F.nn.deformable_psroi_pooling(x, r, t, True, 3, 3, 3, 2,
                                                                     0.25),
    "nms": lambda b, s: F.vision.nms(b, s, iou_thresh=0.3),
    "nms_max": lambda b, s: F.vision.nms(b, s, iou_thresh=0.5, max_output=4),
}


@pytest.mark.parametrize("name", GOLDEN_CALLS, ids=str)
def test_matches_real_megengine(name):
    inputs, want = _golden(name)
    got = GOLDEN_CALLS[name](*inputs).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.abs(got.astype(np.float64) - want).max() <= 1e-5
