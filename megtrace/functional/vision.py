"""`F.vision` (also reachable as `F.nn.*`): image functionals with MegEngine 1.13's names,
arguments, defaults and compositions."""
from __future__ import annotations

from typing import Iterable, Optional, Tuple, Union

import numpy as np

from ..dispatch import apply
from ..tensor import Tensor
from ._convert import cast, require_tensor
from .tensor_ops import expand_dims, reshape

__all__ = ["interpolate", "remap", "warp_perspective"]

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


def _border(value: str) -> str:
    return str(value).upper()


def warp_perspective(inp: Tensor, mat: Tensor, out_shape: Union[Tuple[int, int], int, Tensor],
                     mat_idx: Optional[Union[Iterable[int], Tensor]] = None,
                     border_mode: str = "replicate", border_val: float = 0.0,
                     format: str = "NCHW", interp_mode: str = "linear") -> Tensor:
    """Perspective warp: output(n, c, h, w) = input(n, c, y, x) with
    x = (m00 w + m01 h + m02) / (m20 w + m21 h + m22), y likewise (bilinear taps, border
    taps by `border_mode`). `mat_idx` picks the source image of each matrix."""
    x = require_tensor("warp_perspective", inp)
    if str(format).upper() != "NCHW":
        raise NotImplementedError(f"warp_perspective: format {format!r}; megtrace supports "
                                  f"NCHW")
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
                 border=_border(border_mode), border_val=float(border_val))


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
    return _ints("interpolate: size", size)


def interpolate(inp: Tensor, size: Optional[Union[int, Tuple[int, int]]] = None,
                scale_factor: Optional[Union[float, Tuple[float, float]]] = None,
                mode: str = "bilinear", align_corners: Optional[bool] = None) -> Tensor:
    """Resize NCHW images (3-d NCW for "linear") to `size` or by `scale_factor`. Without
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
        raise NotImplementedError("interpolate: trilinear (Resize3D) is not supported by "
                                  "megtrace yet")
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
