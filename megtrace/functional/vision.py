"""`F.vision` (also reachable as `F.nn.*`): image functionals with MegEngine 1.13's names,
arguments, defaults and compositions."""
from __future__ import annotations

from typing import Iterable, Optional, Tuple, Union

import numpy as np

from ..dispatch import apply
from ..symbolic import SymInt
from ..tensor import Tensor
from ._convert import cast, require_tensor
from .resize3d import trilinear
from .math_extra import argsort
from .tensor_extra import cond_take
from .tensor_ops import arange, expand_dims, reshape

__all__ = ["cvt_color", "interpolate", "nms", "nvof", "remap", "roi_align", "roi_pooling",
           "warp_affine", "warp_perspective"]

_INTERPOLATE_MODES = ("bilinear", "linear", "trilinear", "bicubic", "nearest")
_RESIZE_MODE = {"linear": "linear", "bilinear": "linear", "nearest": "nearest",
                "bicubic": "cubic"}


def _ints(name: str, value) -> tuple[int, ...]:
    """A shape given as int, sequence or Tensor (whose value must be known)."""
    if isinstance(value, Tensor):
        value = value.numpy()
    arr = np.asarray(value).reshape(-1)
    if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and (arr != np.floor(arr)).any()):
        raise TypeError(f"{name}: expected integers, got {value!r}")
    return tuple(int(v) for v in arr)


def _pair(value) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else tuple(int(v) for v in value)


def _border(value: str) -> str:
    return str(value).upper()


def warp_perspective(inp: Tensor, mat: Tensor, out_shape: Union[Tuple[int, int], int, Tensor],
                     mat_idx: Optional[Union[Iterable[int], Tensor]] = None,
                     border_mode: str = "replicate", border_val: float = 0.0,
                     format: str = "NCHW", interp_mode: str = "linear") -> Tensor:
    """Perspective warp: output(n, c, h, w) = input(n, c, y, x) with
    x = (m00 w + m01 h + m02) / (m20 w + m21 h + m22), y likewise (bilinear taps, border
    taps by `border_mode`). `mat_idx` picks the source image of each matrix. NHWC
    float32/uint8 images of 1 to 3 channels sample at 1/32-pixel precision like
    MegEngine's OpenCV-derived x86 kernel."""
    x = require_tensor("warp_perspective", inp)
    fmt = str(format).upper()
    if fmt not in ("NCHW", "NHWC"):
        raise NotImplementedError(f"warp_perspective: format {format!r}; megtrace supports "
                                  f"NCHW and NHWC")
    if str(interp_mode).lower() != "linear":
        raise ValueError(f"warp_perspective: interp_mode {interp_mode!r}; MegEngine supports "
                         f"only 'linear'")
    if x.dtype == np.float16:
        x = cast(x, "float32")
    m = cast(require_tensor("warp_perspective", mat), "float32")
    inputs = [x, m]
    if mat_idx is not None:
        inputs.append(cast(require_tensor("warp_perspective", mat_idx), "int32"))
    return apply("warp_perspective", *inputs, out=_ints("warp_perspective: out_shape", out_shape),
                 border=_border(border_mode), border_val=float(border_val), format=fmt)


def warp_affine(inp: Tensor, mat: Tensor, out_shape: Union[Tuple[int, int], int, Tensor],
                border_mode: str = "replicate", border_val: float = 0.0, format: str = "NHWC",
                interp_mode: str = "linear") -> Tensor:
    """Affine warp by `(batch, 2, 3)` matrices: output(h, w) = input(m10 w + m11 h + m12,
    m00 w + m01 h + m02). NHWC (the default) samples at 1/32-pixel precision like
    MegEngine's OpenCV-derived kernel; NCHW exactly. interp_mode "nearest", "cubic" and
    "lanczos4" exist, as in MegEngine's CPU kernels, for NHWC float32/uint8 images of 1
    to 3 channels only."""
    x = require_tensor("warp_affine", inp)
    return apply("warp_affine", x, cast(require_tensor("warp_affine", mat), "float32"),
                 out=_ints("warp_affine: out_shape", out_shape), border=_border(border_mode),
                 border_val=float(border_val), format=str(format).upper(),
                 imode=str(interp_mode).upper())


def remap(inp: Tensor, map_xy: Tensor, border_mode: str = "replicate", scalar: float = 0.0,
          interp_mode: str = "linear") -> Tensor:
    """output(n, c, h, w) = input(n, c, map_xy[n, h, w, 1], map_xy[n, h, w, 0])."""
    mode = str(interp_mode).lower()
    if mode not in ("linear", "nearest"):
        raise ValueError(f"remap: interp_mode must be 'linear' or 'nearest'; got {interp_mode!r}")
    return apply("remap", require_tensor("remap", inp),
                 cast(require_tensor("remap", map_xy), "float32"),
                 border=_border(border_mode), scalar=float(scalar), nearest=mode == "nearest")


def _target_size(x: Tensor, mode: str, size, scale_factor) -> tuple[int, int]:
    if size is None:
        if scale_factor is None:
            raise ValueError("scale_factor must not be None when size is None")
        if isinstance(scale_factor, (float, int)):
            scale = (float(scale_factor), 1.0 if mode == "linear" else float(scale_factor))
        else:
            if mode == "linear":
                raise ValueError("under linear mode, scale_factor can only be single value")
            scale = tuple(scale_factor)
        assert len(scale) == 2, \
            f"shape of scale_factor of interpolate-{mode} must be equal to (2, )"
        assert all(isinstance(s, (float, int)) for s in scale), \
            "scale_factor of interpolate must be float/int type"
        # MegEngine: floor(float32(in * scale)), per axis
        return tuple(int(np.floor(np.float32(x.shape[i + 2] * float(s))))
                     for i, s in enumerate(scale))
    if scale_factor is not None:
        raise ValueError("scale_factor must be None when size is provided")
    if isinstance(size, int):
        return size, 1
    if mode == "linear":
        raise ValueError("under linear mode, size can only be single value")
    if isinstance(size, (tuple, list)) and all(isinstance(d, SymInt) for d in size):
        return tuple(size)       # y.shape[2:] while tracing: the dump follows y's size
    return _ints("interpolate: size", size)


def _target_size_3d(x: Tensor, size, scale_factor) -> tuple[int, int, int]:
    """MegEngine's dsize for trilinear: floor(float32(in * scale)) per axis, or `size`
    (an int s means (s, 1, 1), as MegEngine reads it)."""
    if size is None:
        if scale_factor is None:
            raise ValueError("scale_factor must not be None when size is None")
        scale = (float(scale_factor),) * 3 if isinstance(scale_factor, (float, int)) \
            else tuple(scale_factor)
        assert len(scale) == 3, \
            "shape of scale_factor of interpolate-trilinear must be equal to (3, )"
        assert all(isinstance(s, (float, int)) for s in scale), \
            "scale_factor of interpolate must be float/int type"
        return tuple(int(np.floor(np.float32(x.shape[i + 2] * float(s))))
                     for i, s in enumerate(scale))
    if scale_factor is not None:
        raise ValueError("scale_factor must be None when size is provided")
    if isinstance(size, int):
        return size, 1, 1
    out = _ints("interpolate: size", size)
    if len(out) != 3:
        raise ValueError(f"interpolate: trilinear size must have 3 values (D, H, W); got {out}")
    return out


def interpolate(inp: Tensor, size: Optional[Union[int, Tuple[int, int]]] = None,
                scale_factor: Optional[Union[float, Tuple[float, float]]] = None,
                mode: str = "bilinear", align_corners: Optional[bool] = None) -> Tensor:
    """Resize NCHW images (3-d NCW for "linear", 5-d NCDHW for "trilinear", MegEngine's
    Resize3D) to `size` or by `scale_factor`. Without
    align_corners this is MegEngine's Resize (half-pixel centres, edge taps clamped);
    with it, a warp_perspective by the corner-aligning scale matrix, as MegEngine does."""
    x = require_tensor("interpolate", inp)
    mode = mode.lower()
    if mode not in _INTERPOLATE_MODES:
        raise ValueError("unsupported interpolate mode: {}".format(mode))
    if mode not in ("bilinear", "linear", "trilinear"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set in the bilinear/linear "
                             "interpolating mode")
    elif align_corners is None:
        align_corners = False
    if mode == "trilinear":
        assert x.ndim == 5, "under trilinear mode, input tensor must have 5 dimensions"
        if x.dtype == np.float16:
            x = cast(x, "float32")
        return trilinear(x, _target_size_3d(x, size, scale_factor), align_corners)
    if mode == "linear":
        x = expand_dims(x, 3)
    assert x.ndim == 4, "shape of input tensor must correspond to the operartion mode"
    oh, ow = _target_size(x, mode, size, scale_factor)
    if x.dtype == np.float16:
        x = cast(x, "float32")
    if not align_corners:
        out = apply("resize", x, size=(oh, ow), mode=_RESIZE_MODE[mode])
    else:
        ih, iw = x.shape[2], x.shape[3]
        hscale = (ih - 1.0) / (oh - 1.0)
        wscale = 1.0 * iw / ow if mode == "linear" else (iw - 1.0) / (ow - 1.0)
        mat = np.array([[wscale, 0, 0], [0, hscale, 0], [0, 0, 1]], np.float32)
        mat = Tensor(np.broadcast_to(mat, (x.shape[0], 3, 3)).copy())
        out = warp_perspective(x, mat, (oh, ow))
    if mode == "linear":
        out = reshape(out, out.shape[0:3])
    return out


def cvt_color(inp: Tensor, mode: str = "") -> Tensor:
    """Convert NHWC images between color formats ("RGB2GRAY", "BGR2GRAY", "RGB2YUV",
    "YUV2RGB", "GRAY2RGB"; uint8 also "RGB2BGR", "BGR2RGB", "RGBA2RGB", "RGBA2BGR",
    "RGBA2GRAY" and the YUV420 modes "[BT601_]YUV2{RGB,BGR}_{NV21,NV12,YV12,YU12}" and
    "YUV2GRAY_*", which take (N, 3H/2, W, 1) images)."""
    from ..ops.color import MODES
    mode = mode.upper() if "YCrCb" not in mode else mode
    assert mode in MODES, "unspport mode for cvt_color"
    return apply("cvt_color", require_tensor("cvt_color", inp), mode=mode)


def nvof(src: Tensor, precision: int = 1) -> Tensor:
    """NVIDIA Optical Flow SDK on (n, t, h, w, 4) uint8 frames. MegEngine 1.13 has it only
    as a CUDA kernel (on CPU it aborts the process); megtrace runs on CPU, so it exists
    by name and refuses clearly."""
    x = require_tensor("nvof", src)
    if x.ndim != 5 or x.shape[4] != 4:
        raise ValueError(f"nvof: src must be (n, t, h, w, 4) uint8 frames; got shape "
                         f"{tuple(x.shape)}")
    raise NotImplementedError(f"nvof (precision={precision}): NVIDIA's optical flow needs a "
                              f"CUDA device; MegEngine 1.13 has no CPU kernel for it and "
                              f"megtrace computes on CPU only")


def roi_align(inp: Tensor, rois: Tensor, output_shape: Union[int, tuple, list],
              mode: str = "average", spatial_scale: float = 1.0,
              sample_points: Union[int, tuple, list] = 2, aligned: bool = True) -> Tensor:
    """RoI Align (Mask R-CNN): each (idx, x0, y0, x1, y1) region of `inp` pooled ("max" or
    "average") over sample_points bilinear samples per output cell."""
    x = cast(require_tensor("roi_align", inp), "float32")
    mode = mode.lower()
    assert mode in ["max", "average"], "only max/average mode is supported"
    return apply("roi_align", x, cast(require_tensor("roi_align", rois), "float32"),
                 mode=mode, pooled=_pair(output_shape), samples=_pair(sample_points),
                 spatial_scale=float(spatial_scale), offset=0.5 if aligned else 0.0)


def roi_pooling(inp: Tensor, rois: Tensor, output_shape: Union[int, tuple, list],
                mode: str = "max", scale: float = 1.0) -> Tensor:
    """RoI pooling (Faster R-CNN): each region split into output_shape cells, each cell
    max- or average-pooled (eager only)."""
    assert mode.lower() in ["max", "average"], "only max/average mode is supported"
    return apply("roi_pooling", cast(require_tensor("roi_pooling", inp), "float32"),
                 cast(require_tensor("roi_pooling", rois), "float32"), mode=mode.lower(),
                 pooled=_pair(output_shape), scale=float(scale))


def nms(boxes: Tensor, scores: Tensor, iou_thresh: float,
        max_output: Optional[int] = None) -> Tensor:
    """Indices of the boxes kept by non-maximum suppression, by descending score. Built
    from graph ops as MegEngine builds it (argsort, NMSKeep, then the first `count` kept
    indices), so a trace records it: the count depends on the values, and the graph
    takes it with CondTake (value-shaped, like boolean-mask indexing)."""
    boxes = require_tensor("nms", boxes)
    scores = require_tensor("nms", scores)
    assert boxes.ndim == 2 and boxes.shape[1] == 4, "the expected shape of boxes is (N, 4)"
    assert scores.ndim == 1, "the expected shape of scores is (N,)"
    assert boxes.shape[0] == scores.shape[0], "number of boxes and scores are not matched"
    order = argsort(scores.detach(), descending=True)
    if max_output is None:
        max_output = boxes.shape[0]
    sorted_boxes = cast(boxes.detach(), "float32")[order]
    indices, count = apply("nms_keep", sorted_boxes, iou_thresh=float(iou_thresh),
                           max_output=int(max_output))
    kept, _ = cond_take(arange(int(max_output), dtype="int32") < count, indices)
    return order[kept]


def deformable_psroi_pooling(inp: Tensor, rois: Tensor, trans: Tensor, no_trans: bool,
                             part_size: int, pooled_h: int, pooled_w: int,
                             sample_per_part: int, spatial_scale: float,
                             trans_std: float = 0.1) -> Tensor:
    """Deformable position-sensitive RoI pooling (R-FCN / Deformable ConvNets): each
    output cell averages sample_per_part**2 bilinear samples, shifted by `trans` times
    trans_std times the RoI size unless no_trans (eager only)."""
    return apply("deformable_psroi_pooling", cast(require_tensor("deformable_psroi_pooling", inp),
                                                   "float32"),
                 cast(require_tensor("deformable_psroi_pooling", rois), "float32"),
                 cast(require_tensor("deformable_psroi_pooling", trans), "float32"),
                 no_trans=bool(no_trans), part_size=int(part_size),
                 pooled=(int(pooled_h), int(pooled_w)), sample_per_part=int(sample_per_part),
                 spatial_scale=float(spatial_scale), trans_std=float(trans_std))
