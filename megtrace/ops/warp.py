"""Geometric image ops, as MegEngine's megdnn kernels compute them: resize (Resize),
warp_perspective (WarpPerspective), remap (Remap), warp_affine (WarpAffine). NCHW
images (warp_affine and warp_perspective also NHWC); the output size is a parameter,
written to .mge as the Int32 shape input MegEngine's oprs take.

Their Relax lowerings are gathers no lift converter could bring back, so they are
`opaque_in_optimize`: TVM's inference passes see them as one call and dumps write them
as their own MegEngine opr.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from ._sampling import BORDER_MODES, round_relax, round_to, sample_np, sample_relax
from ._sampling_grad import sample_grads
from ._warp_cv import cv_fixed_point, perspective_coords_np, perspective_coords_relax
from . import _warp_affine_modes as affine_modes
from .registry import MgeComposite, MgeOpr, OpDef, register
from .shape import check_shape_input

RESIZE = MgeOpr("ResizeV2", "Resize")
WARP_AFFINE = MgeOpr("WarpAffineV2", "WarpAffine")
WARP_PERSPECTIVE = MgeOpr("WarpPerspectiveV2", "WarpPerspective")

_IMAGE_DTYPES = ("float32", "float16", "uint8", "int8")


def _image(name: str, x, ndim: int = 4) -> None:
    if x.ndim != ndim:
        raise ShapeError(f"{name}: input must be {ndim}-d NCHW; got {x}")
    if x.dtype not in _IMAGE_DTYPES:
        raise TypeError(f"{name}: unsupported input dtype {x.dtype}; expected one of "
                        f"{_IMAGE_DTYPES}")


def _out_size(name: str, size) -> None:
    if len(size) != 2 or min(size) <= 0:
        raise ShapeError(f"{name}: output size must be two positive ints; got {size}")


def _border(name: str, border: str) -> None:
    if border not in BORDER_MODES:
        raise ValueError(f"{name}: border mode must be one of {BORDER_MODES}; got {border!r}")


def _size_const(em, size) -> int:
    return em.const(np.array(size, np.int32))


# -- resize (F.vision.interpolate without align_corners) ---------------------------------
_RESIZE_MODES = {"nearest": "NEAREST", "linear": "LINEAR", "cubic": "CUBIC"}


def _resize_infer(x, tsize=None, *, size, mode):
    _image("resize", x)
    _out_size("resize", size)
    check_shape_input("resize", size, tsize)
    if mode not in _RESIZE_MODES:
        raise ValueError(f"resize: mode must be one of {sorted(_RESIZE_MODES)}; got {mode!r}")
    return TensorType(x.shape[:2] + tuple(size), x.dtype)


def _linear_taps(out: int, size: int, nearest: bool):
    """megdnn's ResizeBase::get_nearest_linear_coord: (index, weight) of both taps."""
    idx = np.arange(out, dtype=np.float32)
    scale = np.float32(out) / np.float32(size)
    if size == 1:
        zeros = np.zeros(out, np.int64)
        return zeros, np.ones(out, np.float32), zeros, np.zeros(out, np.float32)
    alpha = (idx + np.float32(0.5)) / scale - np.float32(0.5)
    origin = np.floor(alpha)
    alpha = alpha - origin
    origin = origin.astype(np.int64)
    if nearest:
        origin = np.minimum((idx / scale).astype(np.int64), size - 1)
        alpha = np.zeros(out, np.float32)
    low, high = origin < 0, origin + 1 >= size
    origin = np.where(low, 0, np.where(high, size - 2, origin))
    alpha = np.where(low, np.float32(0), np.where(high, np.float32(1), alpha))
    return origin, np.float32(1) - alpha, origin + 1, alpha


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """OpenCV's cubic coefficients (A = -0.75) for fractional offsets t: shape (..., 4)."""
    a = np.float32(-0.75)
    d = np.stack([t + 1, t, 1 - t, 2 - t], axis=-1).astype(np.float32)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far).astype(np.float32)


def _resize_eager(x, tsize=None, *, size, mode):
    src = x.astype(np.promote_types(x.dtype, np.float32))
    if mode == "cubic":
        out = src
        for axis, (o, n) in ((2, (size[0], x.shape[2])), (3, (size[1], x.shape[3]))):
            alpha = (np.arange(o, dtype=np.float32) + np.float32(0.5)) / \
                (np.float32(o) / np.float32(n)) - np.float32(0.5)
            origin = np.floor(alpha)
            w = _cubic_weights(alpha - origin)
            taps = np.clip(origin.astype(np.int64)[:, None] + np.arange(-1, 3), 0, n - 1)
            picked = np.take(out, taps, axis=axis)          # axis becomes (o, 4)
            shape = [1] * picked.ndim
            shape[axis], shape[axis + 1] = o, 4
            out = (picked * w.reshape(shape)).sum(axis=axis + 1, dtype=src.dtype)
        return round_to(out, x.dtype)
    nearest = mode == "nearest"
    y0, wy0, y1, wy1 = _linear_taps(size[0], x.shape[2], nearest)
    x0, wx0, x1, wx1 = _linear_taps(size[1], x.shape[3], nearest)
    rows = src[:, :, y0] * wy0[:, None] + src[:, :, y1] * wy1[:, None]
    out = rows[..., x0] * wx0 + rows[..., x1] * wx1
    return round_to(out, x.dtype)


def _resize_lower(L, x, tsize=None, *, size, mode):
    R = L.R
    if mode == "nearest":
        y = R.image.resize2d(x, size, method="nearest_neighbor",
                             coordinate_transformation_mode="asymmetric",
                             rounding_method="floor")
    elif mode == "linear":
        y = R.image.resize2d(x, size, method="linear",
                             coordinate_transformation_mode="half_pixel")
    else:
        y = R.image.resize2d(x, size, method="cubic", coordinate_transformation_mode="half_pixel",
                             cubic_alpha=-0.75, cubic_exclude=0)
    return y


def _resize_emit(em, types, p, inputs):
    """The size is the traced shape expression when it has one (as MegEngine writes
    interpolate(x, y.shape[2:])), so the file follows the input sizes."""
    size = inputs[1] if len(inputs) > 1 else _size_const(em, p["size"])
    return em.opr(RESIZE, {"imode": _RESIZE_MODES[p["mode"]], "format": "NCHW"},
                  [inputs[0], size])


def _resize_matrix(out: int, size: int, mode: str) -> np.ndarray:
    """(out, size): resize is separable, y = My x Mx^T per image, with these weights."""
    m = np.zeros((out, size))
    rows = np.arange(out)
    if mode == "cubic":
        alpha = (np.arange(out, dtype=np.float32) + np.float32(0.5)) / \
            (np.float32(out) / np.float32(size)) - np.float32(0.5)
        origin = np.floor(alpha)
        w = _cubic_weights(alpha - origin)
        taps = np.clip(origin.astype(np.int64)[:, None] + np.arange(-1, 3), 0, size - 1)
        for k in range(4):
            np.add.at(m, (rows, taps[:, k]), w[:, k])
        return m
    i0, w0, i1, w1 = _linear_taps(out, size, mode == "nearest")
    np.add.at(m, (rows, i0), w0)
    np.add.at(m, (rows, np.minimum(i1, size - 1)), w1)
    return m


def _resize_vjp(V, inputs, outputs, grads, *, size, mode):
    """gx = My^T g Mx (MegEngine's ResizeBackward), two matrix products."""
    x, g, size_input = inputs[0], grads[0], (None,) * (len(inputs) - 1)
    if x.dtype.kind != "f":
        return (None,) + size_input
    h, w = x.shape[2:]
    my = V.const(_resize_matrix(size[0], h, mode).T.reshape(1, 1, h, size[0]), g)
    mx = V.const(_resize_matrix(size[1], w, mode).reshape(1, 1, size[1], w), g)
    return (V.apply("matmul", my, V.apply("matmul", g, mx)),) + size_input


register(OpDef("resize", params={"size": (1, 1), "mode": "linear"}, shape_input=True,
               shape_param="size",
               eager=_resize_eager, infer=_resize_infer, lower=_resize_lower,
               mge=MgeComposite(_resize_emit), opaque_in_optimize=True, vjp=_resize_vjp))


# -- warp_perspective ---------------------------------------------------------------------
# NHWC_NCHW: an NHWC image in, NCHW out (fuse_preprocess's fused Dimshuffle), computed as
# megdnn's naive kernel does. NHWC: float32/uint8 images of 1 to 3 channels at megdnn's
# x86 OpenCV-derived kernel's 1/32-pixel coordinates (`_warp_cv`), others as the naive
# kernel does.
_WARP_FORMATS = ("NCHW", "NHWC", "NHWC_NCHW")


def _warp_infer(x, mat, mat_idx=None, *, out, border, border_val, dtype=None, format="NCHW"):
    _image("warp_perspective", x)
    if format not in _WARP_FORMATS:
        raise ValueError(f"warp_perspective: format must be one of {_WARP_FORMATS}; got "
                         f"{format!r}")
    if dtype not in (None, "float32") or (dtype is not None and x.dtype != "uint8"):
        raise ValueError(f"warp_perspective: dtype must be None, or 'float32' on uint8 input "
                         f"(enable_fuse_preprocess's fused TypeCvt); got {dtype!r} on {x}")
    if dtype is not None and format == "NHWC":
        raise ValueError("warp_perspective: an output dtype (a fused TypeCvt) needs format "
                         "NCHW or NHWC_NCHW, not NHWC")
    _out_size("warp_perspective", out)
    _border("warp_perspective", border)
    if mat.ndim != 3 or mat.shape[1:] != (3, 3) or mat.dtype != "float32":
        raise ShapeError(f"warp_perspective: mat must be float32 (batch, 3, 3); got {mat}")
    if mat_idx is None:
        if mat.shape[0] != x.shape[0]:
            raise ShapeError(f"warp_perspective: {mat.shape[0]} matrices for {x.shape[0]} "
                             f"images; give mat_idx to pair them otherwise")
    elif mat_idx.ndim != 1 or mat_idx.shape[0] != mat.shape[0] or mat_idx.dtype != "int32":
        raise ShapeError(f"warp_perspective: mat_idx must be int32 ({mat.shape[0]},); "
                         f"got {mat_idx}")
    if format == "NHWC":
        return TensorType((mat.shape[0],) + tuple(out) + (x.shape[3],), x.dtype)
    channels = x.shape[1] if format == "NCHW" else x.shape[3]
    return TensorType((mat.shape[0], channels) + tuple(out), dtype or x.dtype)


def _grid(out):
    oh, ow = out
    return (np.arange(ow, dtype=np.float32).reshape(1, 1, ow),
            np.arange(oh, dtype=np.float32).reshape(1, oh, 1))


def _cv_border_val(dtype, border_val: float) -> float:
    """The OpenCV kernel's border value: cast to the image dtype (truncated for uint8)."""
    return float(np.trunc(border_val)) if str(dtype) == "uint8" else float(border_val)


def _warp_eager(x, mat, mat_idx=None, *, out, border, border_val, dtype=None, format="NCHW"):
    if mat_idx is not None and ((mat_idx < 0) | (mat_idx >= x.shape[0])).any():
        raise IndexError(f"warp_perspective: mat_idx {mat_idx.tolist()} out of range for "
                         f"{x.shape[0]} images")
    if format != "NCHW":
        src = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        if format == "NHWC_NCHW" or not cv_fixed_point(x.shape[3], x.dtype):
            y = _warp_eager(src, mat, mat_idx, out=out, border=border, border_val=border_val,
                            dtype=dtype)
            return y if format == "NHWC_NCHW" else np.ascontiguousarray(y.transpose(0, 2, 3, 1))
        xs, ys = perspective_coords_np(mat, out)
        batch = np.arange(mat.shape[0]) if mat_idx is None else mat_idx.astype(np.int64)
        y = sample_np(src, batch, xs, ys, border=border,
                      border_val=_cv_border_val(x.dtype, border_val))
        return np.ascontiguousarray(round_to(y, x.dtype).transpose(0, 2, 3, 1))
    m = mat.astype(np.promote_types(mat.dtype, np.float32)).reshape(-1, 9, 1, 1)
    gw, gh = _grid(out)
    den = m[:, 6] * gw + m[:, 7] * gh + m[:, 8]
    xs = (m[:, 0] * gw + m[:, 1] * gh + m[:, 2]) / den
    ys = (m[:, 3] * gw + m[:, 4] * gh + m[:, 5]) / den
    batch = np.arange(mat.shape[0]) if mat_idx is None else mat_idx.astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = sample_np(x, batch, xs, ys, border=border, border_val=border_val)
    return round_to(y, dtype or x.dtype)


def _warp_lower(L, x, mat, mat_idx=None, *, out, border, border_val, dtype=None,
                format="NCHW"):
    R = L.R
    n_mat = L.types[1].shape[0]
    src_shape = L.types[0].shape
    batch = L.const(np.arange(n_mat, dtype=np.int32).reshape(-1, 1, 1), "int32") \
        if mat_idx is None else R.reshape(mat_idx, (n_mat, 1, 1))
    if format != "NCHW":
        x = R.permute_dims(x, [0, 3, 1, 2])
        n, h, w, c = src_shape
        src_shape = (n, c, h, w)
    if format == "NHWC":
        if cv_fixed_point(c, L.types[0].dtype):
            xs, ys = perspective_coords_relax(L, mat, n_mat, out)
            y = sample_relax(L, x, src_shape, batch, xs, ys, border=border,
                             border_val=_cv_border_val(L.types[0].dtype, border_val))
        else:
            y = _warp_sample_relax(L, x, src_shape, mat, n_mat, batch, out, border, border_val)
        return R.permute_dims(round_relax(L, y, L.out.dtype), [0, 2, 3, 1])
    y = _warp_sample_relax(L, x, src_shape, mat, n_mat, batch, out, border, border_val)
    return round_relax(L, y, L.out.dtype)


def _warp_sample_relax(L, x, src_shape, mat, n_mat, batch, out, border, border_val):
    """The naive kernel: float32 coordinates, sampled (float32 (M, C, OH, OW))."""
    R = L.R
    gw, gh = (L.const(g, "float32") for g in _grid(out))
    m = R.reshape(mat, (n_mat, 9, 1, 1))

    def coef(i):
        return R.reshape(R.strided_slice(m, axes=[1], begin=[i], end=[i + 1]), (n_mat, 1, 1))

    def plane(i):
        return R.add(R.add(R.multiply(coef(i), gw), R.multiply(coef(i + 1), gh)), coef(i + 2))

    den = plane(6)
    xs, ys = R.divide(plane(0), den), R.divide(plane(3), den)
    return sample_relax(L, x, src_shape, batch, xs, ys, border=border, border_val=border_val)


def _warp_fields(p):
    return {"imode": "LINEAR", "bmode": p["border"], "format": p.get("format", "NCHW"),
            "border_val": float(p["border_val"])}


def _warp_emit(em, types, p, inputs):
    """A float32 `dtype` is the opr config's output dtype (MegEngine's
    FuseWarpPerspectiveDimshufflePass: the TypeCvt after a uint8 warp, fused)."""
    return em.opr(WARP_PERSPECTIVE, _warp_fields(p), list(inputs) + [_size_const(em, p["out"])],
                  output_dtype=p.get("dtype"))


def _grid_consts(V, out, like):
    gw, gh = _grid(out)
    return V.const(gw, like), V.const(gh, like)


def _coef(V, m, i):
    """Coefficient i of the flattened (M, k) matrices as (M, 1, 1)."""
    column = V.apply("subtensor", m, index=((1, i, i + 1, None, None),))
    return V.apply("reshape", column, shape=(m.shape[0], 1, 1))


def _plane_grads(V, gu, gw, gh):
    """d/d(a, b, c) of sum(gu * (a * gw + b * gh + c)) per matrix: three (M, 1) columns."""
    total = lambda t: V.apply("reduce", t, mode="sum", axis=(1, 2), keepdims=False)  # noqa
    return [V.apply("reshape", total(t), shape=(gu.shape[0], 1))
            for t in (gu * gw, gu * gh, gu)]


def _batch(V, n_mat, mat_idx, like):
    if mat_idx is None:
        return V.const(np.arange(n_mat).reshape(-1, 1, 1), like)
    return V.apply("reshape", V.apply("astype", mat_idx, dtype=like.dtype.name),
                   shape=(n_mat, 1, 1))


def _warp_vjp(V, inputs, outputs, grads, *, out, border, border_val, dtype=None,
              format="NCHW"):
    """Through the sampler (WarpPerspectiveBackwardData / BackwardMat): xs = u / d,
    ys = v / d with u, v, d planes of the matrix's rows. NCHW only, as MegEngine's
    backward oprs."""
    if format != "NCHW":
        raise NotImplementedError(f"warp_perspective: no gradient in format {format} "
                                  "(MegEngine's backward oprs are NCHW only)")
    x, mat = inputs[0], inputs[1]
    mat_idx = inputs[2] if len(inputs) > 2 else None
    g = grads[0]
    if x.dtype.kind != "f":
        return (None,) * len(inputs)
    n_mat = mat.shape[0]
    m = V.apply("reshape", V.cast(mat, g), shape=(n_mat, 9))
    gw, gh = _grid_consts(V, out, g)
    plane = lambda i: _coef(V, m, i) * gw + _coef(V, m, i + 1) * gh + _coef(V, m, i + 2)  # noqa
    u, v, d = plane(0), plane(3), plane(6)
    xs, ys = u / d, v / d
    gx, gxs, gys = sample_grads(V, x, _batch(V, n_mat, mat_idx, g), xs, ys, g, border=border,
                                border_val=border_val, want_src=V.needs_grad(0),
                                want_coords=V.needs_grad(1))
    gmat = None
    if V.needs_grad(1):
        gu, gv = gxs / d, gys / d
        gd = V.apply("neg", (gxs * xs + gys * ys) / d)
        cols = _plane_grads(V, gu, gw, gh) + _plane_grads(V, gv, gw, gh) + \
            _plane_grads(V, gd, gw, gh)
        gmat = V.apply("reshape", V.apply("concat", *cols, axis=1), shape=(n_mat, 3, 3))
    return (gx, gmat) + ((None,) if mat_idx is not None else ())


register(OpDef("warp_perspective",
               params={"out": (1, 1), "border": "REPLICATE", "border_val": 0.0, "dtype": None,
                       "format": "NCHW"},
               eager=_warp_eager, infer=_warp_infer, lower=_warp_lower,
               mge=MgeComposite(_warp_emit), opaque_in_optimize=True, vjp=_warp_vjp))


# -- remap --------------------------------------------------------------------------------
def _remap_infer(x, map_xy, *, border, scalar, nearest):
    _image("remap", x)
    _border("remap", border)
    if map_xy.ndim != 4 or map_xy.shape[3] != 2 or map_xy.shape[0] != x.shape[0] or \
            map_xy.dtype != "float32":
        raise ShapeError(f"remap: map_xy must be float32 ({x.shape[0]}, oh, ow, 2); "
                         f"got {map_xy}")
    return TensorType(x.shape[:2] + map_xy.shape[1:3], x.dtype)


def _remap_eager(x, map_xy, *, border, scalar, nearest):
    batch = np.arange(x.shape[0])
    y = sample_np(x, batch, map_xy[..., 0], map_xy[..., 1], border=border,
                  border_val=scalar, nearest=nearest)
    return round_to(y, x.dtype)


def _remap_lower(L, x, map_xy, *, border, scalar, nearest):
    R = L.R
    n, oh, ow, _ = L.types[1].shape

    def coord(i):
        return R.reshape(R.strided_slice(map_xy, axes=[3], begin=[i], end=[i + 1]), (n, oh, ow))

    batch = L.const(np.arange(n, dtype=np.int32).reshape(-1, 1, 1), "int32")
    y = sample_relax(L, x, L.types[0].shape, batch, coord(0), coord(1), border=border,
                     border_val=scalar, nearest=nearest)
    return round_relax(L, y, L.out.dtype)


def _remap_fields(p):
    return {"imode": "NEAREST" if p["nearest"] else "LINEAR", "border_type": p["border"],
            "format": "NCHW", "scalar": float(p["scalar"])}


def _remap_decode(f):
    return {"border": f["border_type"], "scalar": float(f["scalar"]),
            "nearest": f["imode"] == "NEAREST"}


def _remap_vjp(V, inputs, outputs, grads, *, border, scalar, nearest):
    """Through the sampler (RemapBackwardData / BackwardMat); map_xy's last axis holds
    (x, y). Nearest sampling gives the map a zero gradient."""
    (x, map_xy), (g,) = inputs, grads
    if x.dtype.kind != "f":
        return None, None
    n, oh, ow, _ = map_xy.shape
    coord = lambda i: V.apply("reshape", V.apply("subtensor", map_xy, index=(  # noqa
        (3, i, i + 1, None, None),)), shape=(n, oh, ow))
    batch = V.const(np.arange(n).reshape(-1, 1, 1), g)
    gx, gxs, gys = sample_grads(V, x, batch, coord(0), coord(1), g, border=border,
                                border_val=scalar, nearest=nearest,
                                want_src=V.needs_grad(0), want_coords=V.needs_grad(1))
    gmap = None
    if V.needs_grad(1):
        gmap = V.apply("concat", V.apply("expand_dims", gxs, axis=(3,)),
                       V.apply("expand_dims", gys, axis=(3,)), axis=3)
    return gx, gmap


register(OpDef("remap", params={"border": "REPLICATE", "scalar": 0.0, "nearest": False},
               eager=_remap_eager, infer=_remap_infer, lower=_remap_lower,
               mge=MgeOpr("RemapV1", "Remap", fields=_remap_fields, decode=_remap_decode),
               opaque_in_optimize=True, vjp=_remap_vjp))


# -- warp_affine --------------------------------------------------------------------------
# NHWC float32/uint8 images of 1 to 3 channels go through megdnn's OpenCV-derived kernel,
# which quantizes source coordinates to 1/32 pixel (10-bit fixed point, rounded to 5 bits);
# everything else takes the exact float path.
_AB_SCALE, _INTER_TAB = 1024, 32


def _fixed_point(x, format: str) -> bool:
    return format == "NHWC" and x.shape[3] in (1, 2, 3) and str(x.dtype) in ("float32", "uint8")


def _affine_infer(x, mat, *, out, border, border_val, format, imode="LINEAR"):
    _image("warp_affine", x)
    _affine_imode(x, format, imode)
    _out_size("warp_affine", out)
    _border("warp_affine", border)
    if format not in ("NCHW", "NHWC"):
        raise ValueError(f"warp_affine: format must be 'NCHW' or 'NHWC'; got {format!r}")
    if mat.ndim != 3 or mat.shape[1:] != (2, 3) or mat.shape[0] != x.shape[0] or \
            mat.dtype != "float32":
        raise ShapeError(f"warp_affine: mat must be float32 ({x.shape[0]}, 2, 3); got {mat}")
    if format == "NCHW":
        return TensorType(x.shape[:2] + tuple(out), x.dtype)
    return TensorType((x.shape[0],) + tuple(out) + (x.shape[3],), x.dtype)


def _affine_coords_np(mat, out, fixed_point: bool):
    m = mat.astype(np.promote_types(mat.dtype, np.float32)).reshape(-1, 6, 1, 1)
    gw, gh = _grid(out)
    if not fixed_point:
        return (m[:, 0] * gw + m[:, 1] * gh + m[:, 2], m[:, 3] * gw + m[:, 4] * gh + m[:, 5])
    m, gw, gh = m.astype(np.float64), gw.astype(np.float64), gh.astype(np.float64)
    half = _AB_SCALE // _INTER_TAB // 2
    shift = _AB_SCALE // _INTER_TAB

    def axis(a, b, c):
        fixed = np.rint(a * gw * _AB_SCALE) + np.rint((b * gh + c) * _AB_SCALE) + half
        return (np.floor_divide(fixed, shift) / _INTER_TAB).astype(np.float32)
    return axis(m[:, 0], m[:, 1], m[:, 2]), axis(m[:, 3], m[:, 4], m[:, 5])


def _affine_imode(x, format: str, imode: str) -> None:
    """MegEngine's CPU warp_affine: bilinear everywhere; nearest, cubic and lanczos4 only
    in its OpenCV-derived NHWC kernel (float32/uint8, 1 to 3 channels)."""
    if imode not in affine_modes.IMODES:
        raise ValueError(f"warp_affine: interp_mode must be one of "
                         f"{[m.lower() for m in affine_modes.IMODES]}; got {imode.lower()!r}")
    if imode == "LINEAR":
        return
    if format != "NHWC":
        raise ValueError(f"warp_affine: interp_mode {imode.lower()!r} needs format 'NHWC' "
                         f"(MegEngine's {format} kernel is bilinear only)")
    if not affine_modes.supported(x.shape[3], x.dtype):
        raise ValueError(f"warp_affine: interp_mode {imode.lower()!r} needs a float32 or "
                         f"uint8 NHWC image of 1 to 3 channels (MegEngine's only kernel for "
                         f"it); got {x}")


def _affine_eager(x, mat, *, out, border, border_val, format, imode="LINEAR"):
    if imode != "LINEAR":
        return affine_modes.warp_np(x, mat, out, imode=imode, border=border,
                                    border_val=_cv_border_val(x.dtype, border_val))
    nhwc = format == "NHWC"
    src = x.transpose(0, 3, 1, 2) if nhwc else x
    xs, ys = _affine_coords_np(mat, out, _fixed_point(x, format))
    y = sample_np(src, np.arange(x.shape[0]), xs, ys, border=border, border_val=border_val)
    y = round_to(y, x.dtype)
    return y.transpose(0, 2, 3, 1) if nhwc else y


def _affine_lower(L, x, mat, *, out, border, border_val, format, imode="LINEAR"):
    if imode != "LINEAR":
        return affine_modes.warp_relax(L, x, mat, L.types[0], out, imode=imode, border=border,
                                       border_val=_cv_border_val(L.types[0].dtype, border_val))
    R = L.R
    n = L.types[1].shape[0]
    nhwc = format == "NHWC"
    fixed = _fixed_point(L.types[0], format)
    m = R.reshape(mat, (n, 6, 1, 1))
    gw, gh = _grid(out)

    def coef(i, dtype):
        c = R.reshape(R.strided_slice(m, axes=[1], begin=[i], end=[i + 1]), (n, 1, 1))
        return c if dtype == "float32" else R.astype(c, dtype)

    def axis(i):
        if not fixed:
            return R.add(R.add(R.multiply(coef(i, "float32"), L.const(gw, "float32")),
                               R.multiply(coef(i + 1, "float32"), L.const(gh, "float32"))),
                         coef(i + 2, "float32"))
        scale = L.const(float(_AB_SCALE), "float64")
        along = R.round(R.multiply(R.multiply(coef(i, "float64"), L.const(gw, "float64")), scale))
        across = R.round(R.multiply(R.add(R.multiply(coef(i + 1, "float64"),
                                                     L.const(gh, "float64")),
                                          coef(i + 2, "float64")), scale))
        total = R.add(R.add(along, across), L.const(_AB_SCALE // _INTER_TAB // 2, "float64"))
        steps = R.floor(R.divide(total, L.const(_AB_SCALE // _INTER_TAB, "float64")))
        return R.astype(R.divide(steps, L.const(_INTER_TAB, "float64")), "float32")

    src = R.permute_dims(x, [0, 3, 1, 2]) if nhwc else x
    shape = L.types[0].shape
    shape = (shape[0], shape[3], shape[1], shape[2]) if nhwc else shape
    batch = L.const(np.arange(n, dtype=np.int32).reshape(-1, 1, 1), "int32")
    y = sample_relax(L, src, shape, batch, axis(0), axis(3), border=border,
                     border_val=border_val)
    y = round_relax(L, y, L.out.dtype)
    return R.permute_dims(y, [0, 2, 3, 1]) if nhwc else y


def _affine_emit(em, types, p, inputs):
    fields = {"imode": p.get("imode", "LINEAR"), "border_mode": p["border"],
              "border_val": float(p["border_val"]), "format": p["format"]}
    return em.opr(WARP_AFFINE, fields, list(inputs) + [_size_const(em, p["out"])])


def _affine_vjp(V, inputs, outputs, grads, *, out, border, border_val, format,
                imode="LINEAR"):
    """Through the sampler with xs, ys affine in the matrix. The 1/32-pixel quantized
    coordinates of the NHWC fixed-point kernel are differentiated as the exact ones."""
    if imode != "LINEAR":
        raise NotImplementedError(f"warp_affine: no gradient for interp_mode "
                                  f"{imode.lower()!r} (imode {imode}; only 'linear' has one)")
    (x, mat), (g,) = inputs, grads
    if x.dtype.kind != "f":
        return None, None
    nhwc = format == "NHWC"
    src = V.apply("transpose", x, pattern=(0, 3, 1, 2)) if nhwc else x
    gy = V.apply("transpose", g, pattern=(0, 3, 1, 2)) if nhwc else g
    n = mat.shape[0]
    m = V.apply("reshape", V.cast(mat, g), shape=(n, 6))
    gw, gh = _grid_consts(V, out, g)
    plane = lambda i: _coef(V, m, i) * gw + _coef(V, m, i + 1) * gh + _coef(V, m, i + 2)  # noqa
    gsrc, gxs, gys = sample_grads(V, src, V.const(np.arange(n).reshape(-1, 1, 1), g),
                                  plane(0), plane(3), gy, border=border,
                                  border_val=border_val, want_src=V.needs_grad(0),
                                  want_coords=V.needs_grad(1))
    if gsrc is not None and nhwc:
        gsrc = V.apply("transpose", gsrc, pattern=(0, 2, 3, 1))
    gmat = None
    if V.needs_grad(1):
        cols = _plane_grads(V, gxs, gw, gh) + _plane_grads(V, gys, gw, gh)
        gmat = V.apply("reshape", V.apply("concat", *cols, axis=1), shape=(n, 2, 3))
    return gsrc, gmat


register(OpDef("warp_affine",
               params={"out": (1, 1), "border": "REPLICATE", "border_val": 0.0,
                       "format": "NHWC", "imode": "LINEAR"},
               eager=_affine_eager, infer=_affine_infer, lower=_affine_lower,
               mge=MgeComposite(_affine_emit), opaque_in_optimize=True, vjp=_affine_vjp))
