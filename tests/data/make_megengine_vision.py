"""Golden outputs of MegEngine 1.13 image/vision functionals (run in the megref chroot:
`../shared/megref/mpy tests/data/make_megengine_vision.py`). Writes megengine_vision.npz
with, for each case, `<case>.in<i>` inputs and `<case>.out<j>` outputs."""
import numpy as np
import megengine as mge
import megengine.functional as F

mge.config.async_level = 0

rng = np.random.RandomState(0)
img = rng.uniform(-2, 2, size=(2, 3, 5, 7)).astype("float32")
tiny = rng.uniform(-2, 2, size=(2, 2, 1, 1)).astype("float32")
u8 = rng.randint(0, 256, size=(2, 2, 6, 5)).astype("uint8")
col = np.arange(32, dtype="float32").reshape(1, 1, 32, 1)
rows = rng.uniform(-2, 2, size=(2, 3, 6)).astype("float32")


def persp(n):
    m = np.tile(np.eye(3, dtype="float32"), (n, 1, 1))
    m[:, :2, :] += rng.uniform(-0.3, 0.3, size=(n, 2, 3)).astype("float32")
    m[:, :2, 2] += rng.uniform(-3, 3, size=(n, 2)).astype("float32")
    m[:, 2, :2] = rng.uniform(-0.05, 0.05, size=(n, 2)).astype("float32")
    return m


mat2, mat4 = persp(2), persp(4)
aff = mat2[:, :2, :].copy()
nhwc = img.transpose(0, 2, 3, 1).copy()
map_xy = rng.uniform(-2, 8, size=(2, 4, 6, 2)).astype("float32")
rgb = rng.uniform(0, 1, size=(2, 4, 5, 3)).astype("float32")
feat = rng.uniform(-1, 1, size=(2, 3, 16, 12)).astype("float32")
rois = np.array([[0, 1.2, 2.3, 9.1, 13.5], [1, 0.0, 0.0, 11.0, 15.0],
                 [1, 4.4, 3.3, 6.1, 5.7], [0, -2.0, 3.0, 5.0, 20.0]], "float32")
boxes = rng.uniform(0, 50, size=(30, 4)).astype("float32")
boxes[:, 2:] += boxes[:, :2] + 5
scores = rng.uniform(0, 1, size=(30,)).astype("float32")

cases = {}
for mode in ("nearest", "bilinear", "bicubic"):
    cases[f"resize_{mode}_down"] = ([img], lambda a, m=mode: F.vision.interpolate(a, (3, 4), mode=m))
    cases[f"resize_{mode}_up"] = ([img], lambda a, m=mode: F.vision.interpolate(a, (9, 11), mode=m))
    cases[f"resize_{mode}_odd"] = ([img], lambda a, m=mode: F.vision.interpolate(a, (7, 5), mode=m))
    cases[f"resize_{mode}_tiny"] = ([tiny], lambda a, m=mode: F.vision.interpolate(a, (3, 2), mode=m))
    cases[f"resize_{mode}_scale"] = ([img], lambda a, m=mode: F.vision.interpolate(a, scale_factor=1.7, mode=m))
cases["resize_col_mean"] = ([col], lambda a: F.vision.interpolate(a, (1, 1)))
cases["align_bilinear"] = ([img], lambda a: F.vision.interpolate(a, (9, 11), align_corners=True))
cases["align_bilinear_down"] = ([img], lambda a: F.vision.interpolate(a, (3, 4), align_corners=True))
cases["linear"] = ([rows], lambda a: F.vision.interpolate(a, 11, mode="linear"))
cases["linear_align"] = ([rows], lambda a: F.vision.interpolate(a, 11, mode="linear", align_corners=True))
cases["linear_scale"] = ([rows], lambda a: F.vision.interpolate(a, scale_factor=2.5, mode="linear"))
for b in ("replicate", "constant", "reflect", "reflect_101", "wrap"):
    cases[f"warp_persp_{b}"] = ([img, mat2], lambda a, m, b=b: F.vision.warp_perspective(
        a, m, (6, 8), border_mode=b, border_val=0.5))
    cases[f"warp_affine_{b}"] = ([img, aff], lambda a, m, b=b: F.vision.warp_affine(
        a, m, (6, 8), border_mode=b, border_val=0.5, format="NCHW"))
    cases[f"remap_{b}"] = ([img, map_xy], lambda a, m, b=b: F.vision.remap(
        a, m, border_mode=b, scalar=0.5))
cases["warp_persp_u8"] = ([u8, mat2], lambda a, m: F.vision.warp_perspective(a, m, (7, 4)))
cases["warp_persp_idx"] = ([img, mat4, np.array([1, 0, 0, 1], "int32")],
                           lambda a, m, i: F.vision.warp_perspective(a, m, (4, 9), mat_idx=i))
cases["warp_affine_nhwc"] = ([nhwc, aff], lambda a, m: F.vision.warp_affine(a, m, (6, 8)))
cases["warp_affine_nearest"] = ([img, aff], lambda a, m: F.vision.warp_affine(
    a, m, (6, 8), format="NCHW", interp_mode="nearest"))
cases["remap_nearest"] = ([img, map_xy], lambda a, m: F.vision.remap(a, m, interp_mode="nearest"))
for mode in ("RGB2GRAY", "BGR2GRAY", "RGB2YUV", "YUV2RGB", "GRAY2RGB", "RGB2BGR"):
    src = rgb[..., :1].copy() if mode.startswith("GRAY") else rgb
    cases[f"cvt_{mode}"] = ([src], lambda a, m=mode: F.vision.cvt_color(a, mode=m))
cases["cvt_u8_RGB2GRAY"] = ([(rgb * 255).astype("uint8")], lambda a: F.vision.cvt_color(a, mode="RGB2GRAY"))
cases["roi_align_avg"] = ([feat, rois], lambda a, r: F.vision.roi_align(a, r, (3, 4), spatial_scale=0.5))
cases["roi_align_max"] = ([feat, rois], lambda a, r: F.vision.roi_align(
    a, r, (2, 3), mode="max", spatial_scale=0.75, sample_points=(3, 2), aligned=False))
cases["roi_pooling_max"] = ([feat, rois], lambda a, r: F.vision.roi_pooling(a, r, (3, 2), scale=0.5))
cases["roi_pooling_avg"] = ([feat, rois], lambda a, r: F.vision.roi_pooling(a, r, 3, mode="average", scale=0.7))
cases["nms"] = ([boxes, scores], lambda b, s: F.vision.nms(b, s, iou_thresh=0.3))
cases["nms_max"] = ([boxes, scores], lambda b, s: F.vision.nms(b, s, iou_thresh=0.5, max_output=4))
ps_feat = rng.uniform(-1, 1, size=(2, 8, 12, 10)).astype("float32")
ps_rois = np.array([[0, 1.4, 2.6, 30.2, 40.7], [1, 10.0, 4.0, 20.0, 9.0]], "float32")
ps_trans = rng.uniform(-1, 1, size=(2, 2, 3, 3)).astype("float32")
cases["dpsroi_trans"] = ([ps_feat, ps_rois, ps_trans], lambda a, r, t: F.deformable_psroi_pooling(
    a, r, t, False, 3, 3, 3, 4, 0.25, 0.1))
cases["dpsroi_no_trans"] = ([ps_feat, ps_rois, ps_trans], lambda a, r, t: F.deformable_psroi_pooling(
    a, r, t, True, 3, 3, 3, 2, 0.25, 0.1))

out = {}
for name, (inputs, fn) in cases.items():
    try:
        res = fn(*[mge.tensor(a) for a in inputs])
        res = [r.numpy() for r in (res if isinstance(res, (list, tuple)) else [res])]
    except Exception as e:  # noqa: BLE001
        print("skip", name, type(e).__name__, str(e).splitlines()[0][:100])
        continue
    for i, a in enumerate(inputs):
        out[f"{name}.in{i}"] = a
    for j, r in enumerate(res):
        out[f"{name}.out{j}"] = r
np.savez_compressed("tests/data/megengine_vision.npz", **out)
print(len(cases), "cases")
