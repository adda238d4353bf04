"""Sliding windows over NCHW images: sliding_window (MegEngine's Images2Neibs: every
window as its own (wh, ww) block, zero padding) and its adjoint sliding_window_transpose
(SlidingWindowTranspose: windows summed back onto the image)."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from .registry import MgeOpr, OpDef, register


def _out_hw(name: str, hw, window, padding, stride, dilation) -> tuple[int, int]:
    out = tuple((hw[i] + 2 * padding[i] - dilation[i] * (window[i] - 1) - 1) // stride[i] + 1
                for i in range(2))
    if min(window) <= 0 or min(stride) <= 0 or min(dilation) <= 0 or min(padding) < 0:
        raise ValueError(f"{name}: window, stride and dilation must be positive and padding "
                         f"non-negative; got window={window} stride={stride} "
                         f"dilation={dilation} padding={padding}")
    if min(out) <= 0:
        raise ShapeError(f"{name}: a {window} window (dilation {dilation}) does not fit the "
                         f"padded {tuple(hw)} image")
    return out


def _flat_positions(hw, out, window, padding, stride, dilation) -> np.ndarray:
    """Index into the padded image (flattened H*W) of every (oh, ow, kh, kw) tap."""
    wp = hw[1] + 2 * padding[1]
    rows = (np.arange(out[0])[:, None, None, None] * stride[0]
            + np.arange(window[0])[None, None, :, None] * dilation[0])
    cols = (np.arange(out[1])[None, :, None, None] * stride[1]
            + np.arange(window[1])[None, None, None, :] * dilation[1])
    return (rows * wp + cols).astype(np.int32)


def _padded_hw(hw, padding):
    return hw[0] + 2 * padding[0], hw[1] + 2 * padding[1]


def _fields(p, out=None) -> dict:
    fields = {"pad_h": p["padding"][0], "pad_w": p["padding"][1],
              "stride_h": p["stride"][0], "stride_w": p["stride"][1],
              "dilate_h": p["dilation"][0], "dilate_w": p["dilation"][1],
              "window_h": p["window"][0], "window_w": p["window"][1]}
    if out is not None:
        fields.update(out_h=out[0], out_w=out[1])
    return fields


def _decode(f) -> dict:
    return {"padding": (f["pad_h"], f["pad_w"]), "stride": (f["stride_h"], f["stride_w"]),
            "dilation": (f["dilate_h"], f["dilate_w"]), "window": (f["window_h"], f["window_w"])}


_DEFAULTS = {"window": (3, 3), "padding": (0, 0), "stride": (1, 1), "dilation": (1, 1)}


# -- sliding_window (Images2Neibs) --------------------------------------------------------
def _sw_infer(x, *, window, padding, stride, dilation):
    if x.ndim != 4:
        raise ShapeError(f"sliding_window: input must be 4-d NCHW; got {x}")
    out = _out_hw("sliding_window", x.shape[2:], window, padding, stride, dilation)
    return TensorType(x.shape[:2] + out + tuple(window), x.dtype)


def _sw_eager(x, *, window, padding, stride, dilation):
    out = _out_hw("sliding_window", x.shape[2:], window, padding, stride, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    idx = _flat_positions(x.shape[2:], out, window, padding, stride, dilation)
    return xp.reshape(x.shape[:2] + (-1,))[:, :, idx]


def _sw_lower(L, x, *, window, padding, stride, dilation):
    R = L.R
    n, c, h, w = L.types[0].shape
    out = L.out.shape[2:4]
    xp = R.nn.pad(x, [0, 0, 0, 0, padding[0], padding[0], padding[1], padding[1]]) \
        if any(padding) else x
    hp, wp = _padded_hw((h, w), padding)
    idx = _flat_positions((h, w), out, window, padding, stride, dilation).reshape(-1)
    taps = R.take(R.reshape(xp, (n, c, hp * wp)), L.const(idx, "int32"), axis=2)
    return R.reshape(taps, L.out.shape)


def _sw_vjp(V, inputs, outputs, grads, *, window, padding, stride, dilation):
    """The windows summed back onto the image (MegEngine: Images2NeibsBackward)."""
    (x,), (g,) = inputs, grads
    return (V.apply("sliding_window_transpose", g, out=tuple(x.shape[2:]), window=window,
                    padding=padding, stride=stride, dilation=dilation),)


def _swt_vjp(V, inputs, outputs, grads, *, out, window, padding, stride, dilation):
    """The adjoint of summing windows back is reading them out."""
    return (V.apply("sliding_window", grads[0], window=window, padding=padding,
                    stride=stride, dilation=dilation),)


register(OpDef("sliding_window", params=_DEFAULTS, eager=_sw_eager, infer=_sw_infer,
               lower=_sw_lower,
               mge=MgeOpr("Images2Neibs", "Images2Neibs", fields=_fields, decode=_decode),
               opaque_in_optimize=True, vjp=_sw_vjp))


# -- sliding_window_transpose (SlidingWindowTranspose) ------------------------------------
def _swt_infer(x, *, out, window, padding, stride, dilation):
    if x.ndim != 6:
        raise ShapeError(f"sliding_window_transpose: input must be 6-d (N, C, OH, OW, wh, ww); "
                         f"got {x}")
    grid = _out_hw("sliding_window_transpose", out, window, padding, stride, dilation)
    if x.shape[2:] != grid + tuple(window):
        raise ShapeError(f"sliding_window_transpose: input {x} does not match output size "
                         f"{out}: expected (N, C) + {grid + tuple(window)}")
    return TensorType(x.shape[:2] + tuple(out), x.dtype)


def _swt_eager(x, *, out, window, padding, stride, dilation):
    n, c = x.shape[:2]
    hp, wp = _padded_hw(out, padding)
    idx = _flat_positions(out, x.shape[2:4], window, padding, stride, dilation).reshape(-1)
    # in the input dtype, window by window in (oh, ow, kh, kw) order, as MegEngine sums
    acc = np.zeros((n, c, hp * wp), x.dtype)
    np.add.at(acc, (slice(None), slice(None), idx), x.reshape(n, c, -1))
    acc = acc.reshape(n, c, hp, wp)[:, :, padding[0]:padding[0] + out[0],
                                    padding[1]:padding[1] + out[1]]
    return acc.astype(x.dtype)


def _swt_lower(L, x, *, out, window, padding, stride, dilation):
    R = L.R
    n, c = L.types[0].shape[:2]
    hp, wp = _padded_hw(out, padding)
    idx = _flat_positions(out, L.types[0].shape[2:4], window, padding, stride, dilation)
    idx = np.broadcast_to(idx.reshape(1, 1, -1), (n, c, idx.size))
    zeros = L.const(np.zeros((n, c, hp * wp)), L.out.dtype)
    acc = R.scatter_elements(zeros, L.const(idx, "int32"), R.reshape(x, (n, c, idx.shape[2])),
                             axis=2, reduction="add")
    acc = R.reshape(acc, (n, c, hp, wp))
    return R.strided_slice(acc, axes=[2, 3], begin=[padding[0], padding[1]],
                           end=[padding[0] + out[0], padding[1] + out[1]])


register(OpDef("sliding_window_transpose", params={"out": (1, 1), **_DEFAULTS},
               eager=_swt_eager, infer=_swt_infer, lower=_swt_lower,
               mge=MgeOpr("SlidingWindowTranspose", "SlidingWindowTranspose",
                          fields=lambda p: _fields(p, p["out"]),
                          decode=lambda f: {**_decode(f), "out": (f["out_h"], f["out_w"])}),
               opaque_in_optimize=True, vjp=_swt_vjp))
