"""Region restricted convolution (MegEngine's RegionRestrictedConvolution).

A grouped 2-D cross-correlation in which an input pixel contributes to an output pixel
only when their region ids agree: with `rin` (N, IH, IW) and `rout` (N, OH, OW), both int32
or both uint8,

    y[n, g*OCg+o, oh, ow] = sum_{c, kh, kw} x[n, g*ICg+c, ih, iw] * w[g, o, c, kh, kw]
                            * (rin[n, ih, iw] == rout[n, oh, ow])

over the taps (ih, iw) = (oh + kh*dh - ph, ow + kw*dw - pw) inside the input. The weight is
always grouped (G, OCg, ICg, KH, KW) and the stride 1, as MegEngine requires. The region
maps get no gradient.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from .conv import _work_dtype
from .registry import MgeOpr, OpDef, register

_REGION_DTYPES = ("int32", "uint8")


def _rr_infer(x, w, rin, rout, *, stride, padding, dilation):
    name = "region_restricted_conv"
    if x.dtype not in ("float32", "float16") or w.dtype != x.dtype:
        raise DTypeError(f"{name}: only float type is supported (input and weight of one "
                         f"float dtype); got {x.dtype} and {w.dtype}")
    if tuple(stride) != (1, 1):
        raise ValueError(f"{name}: RegionRestrictedConv only support stride 1; got "
                         f"{tuple(stride)}")
    if min(dilation) <= 0 or min(padding) < 0:
        raise ValueError(f"{name}: dilation must be positive and padding >= 0; got "
                         f"padding={tuple(padding)}, dilation={tuple(dilation)}")
    if x.ndim != 4:
        raise ShapeError(f"{name}: input must be 4-d NCHW; got {x}")
    if w.ndim != 5:
        raise ShapeError(f"{name}: weight must be 5-d (groups, OC/groups, IC/groups, KH, KW)"
                         f"; RegionRestrictedConv is grouped only; got {w}")
    g, ocg, icg, kh, kw = w.shape
    if x.shape[1] != g * icg:
        raise ShapeError(f"{name}: input has {x.shape[1]} channels, weight {w} expects "
                         f"{g * icg}")
    n, _, ih, iw = x.shape
    oh = ih + 2 * padding[0] - dilation[0] * (kh - 1)
    ow = iw + 2 * padding[1] - dilation[1] * (kw - 1)
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"{name}: kernel {(kh, kw)} does not fit input {x} with padding "
                         f"{tuple(padding)}")
    if rin.shape != (n, ih, iw):
        raise ShapeError(f"{name}: rin must be (N, IH, IW) = {(n, ih, iw)}; got {rin}")
    if rout.shape != (n, oh, ow):
        raise ShapeError(f"{name}: rout must be (N, OH, OW) = {(n, oh, ow)}; got {rout}")
    if rin.dtype != rout.dtype or rin.dtype not in _REGION_DTYPES:
        raise DTypeError(f"{name}: the dtype of rin/rout should be Int32 or Uint8, got "
                         f"{rin.dtype} and {rout.dtype}")
    return TensorType((n, g * ocg, oh, ow), x.dtype)


def _taps(kh, kw, dilation):
    for i, j in itertools.product(range(kh), range(kw)):
        yield i, j, i * dilation[0], j * dilation[1]


def _rr_eager(x, w, rin, rout, *, stride, padding, dilation):
    g, ocg, icg, kh, kw = w.shape
    n, oh, ow = rout.shape
    work = _work_dtype(x.dtype)
    pads = ((padding[0],) * 2, (padding[1],) * 2)
    xp = np.pad(x.astype(work, copy=False), ((0, 0), (0, 0)) + pads)
    xp = xp.reshape((n, g, icg) + xp.shape[2:])
    # taps that fall into the padding read zeros, so their region id does not matter
    rp = np.pad(rin.astype(np.int64), ((0, 0),) + pads)
    rout = rout.astype(np.int64)
    wk = w.astype(work, copy=False)
    out = np.zeros((n, g, ocg, oh, ow), work)
    for i, j, h0, w0 in _taps(kh, kw, dilation):
        mask = (rp[:, h0:h0 + oh, w0:w0 + ow] == rout).astype(work)      # (N, OH, OW)
        patch = xp[:, :, :, h0:h0 + oh, w0:w0 + ow] * mask[:, None, None]
        out += np.einsum("ngchw,goc->ngohw", patch, wk[:, :, :, i, j])
    return out.reshape(n, g * ocg, oh, ow).astype(x.dtype)


def _rr_lower(L, x, w, rin, rout, *, stride, padding, dilation):
    R = L.R
    g, ocg, icg, kh, kw = L.types[1].shape
    n, oh, ow = L.types[3].shape
    dtype = L.types[0].dtype
    xp = R.nn.pad(x, (0, 0, 0, 0, padding[0], padding[0], padding[1], padding[1]))
    xp = R.reshape(xp, (n, g, icg) + tuple(L.types[0].shape[2:][k] + 2 * padding[k]
                                           for k in range(2)))
    rp = R.nn.pad(rin, (0, 0, padding[0], padding[0], padding[1], padding[1]))
    total = None
    for i, j, h0, w0 in _taps(kh, kw, dilation):
        patch = R.strided_slice(xp, axes=[3, 4], begin=[h0, w0], end=[h0 + oh, w0 + ow])
        region = R.strided_slice(rp, axes=[1, 2], begin=[h0, w0], end=[h0 + oh, w0 + ow])
        mask = R.reshape(R.astype(R.equal(region, rout), dtype), (n, 1, 1, oh, ow))
        wij = R.squeeze(R.strided_slice(w, axes=[3, 4], begin=[i, j], end=[i + 1, j + 1]),
                        axis=[3, 4])                                 # (G, OCg, ICg)
        term = R.einsum([R.multiply(patch, mask), wij], "ngchw,goc->ngohw")
        total = term if total is None else R.add(total, term)
    return R.reshape(total, (n, g * ocg, oh, ow))


def _rr_vjp(V, inputs, outputs, grads, *, stride, padding, dilation):
    """Through the masked windows: with win = sliding_window(x) masked by where the
    window's region ids equal the output's, gw is a batched matrix product of the masked
    windows and gy per group, and gx sums w^T gy, masked, back onto the image
    (sliding_window_transpose)."""
    (x, w, rin, rout), (gy,) = inputs, grads
    g, ocg, icg, kh, kw = w.shape
    n, c, ih, iw = x.shape
    oh, ow = rout.shape[1:]
    geometry = dict(window=(kh, kw), padding=tuple(padding), stride=(1, 1),
                    dilation=tuple(dilation))
    regions = V.apply("reshape", V.apply("astype", rin, dtype="float32"), shape=(n, 1, ih, iw))
    rwin = V.apply("sliding_window", regions, **geometry)             # (N, 1, OH, OW, kh, kw)
    rout_f = V.apply("reshape", V.apply("astype", rout, dtype="float32"),
                     shape=(n, 1, oh, ow, 1, 1))
    mask = V.apply("astype", V.apply("eq", rwin, rout_f), dtype=x.dtype.name)
    k = icg * kh * kw
    # gy as (G, OCg, N*OH*OW)
    gyg = V.apply("reshape", gy, shape=(n, g, ocg, oh * ow))
    gyg = V.apply("reshape", V.apply("transpose", gyg, pattern=(1, 2, 0, 3)),
                  shape=(g, ocg, n * oh * ow))
    gx = gw = None
    if V.needs_grad(1):
        win = V.apply("sliding_window", x, **geometry) * mask         # (N, C, OH, OW, kh, kw)
        win = V.apply("reshape", win, shape=(n, g, icg, oh * ow, kh, kw))
        win = V.apply("reshape", V.apply("transpose", win, pattern=(1, 2, 4, 5, 0, 3)),
                      shape=(g, k, n * oh * ow))
        gw = V.apply("matmul", win, gyg, transpose_a=False, transpose_b=True)   # (G, K, OCg)
        gw = V.apply("reshape", gw, shape=(g, icg, kh, kw, ocg))
        gw = V.apply("transpose", gw, pattern=(0, 4, 1, 2, 3))
    if V.needs_grad(0):
        wk = V.apply("reshape", w, shape=(g, ocg, k))
        gwin = V.apply("matmul", wk, gyg, transpose_a=True, transpose_b=False)  # (G, K, N*OH*OW)
        gwin = V.apply("reshape", gwin, shape=(g, icg, kh, kw, n, oh, ow))
        gwin = V.apply("reshape", V.apply("transpose", gwin, pattern=(4, 0, 1, 5, 6, 2, 3)),
                       shape=(n, c, oh, ow, kh, kw)) * mask
        gx = V.apply("sliding_window_transpose", gwin, out=(ih, iw), **geometry)
    return gx, gw, None, None


def _rr_fields(p):
    return {"pad_h": p["padding"][0], "pad_w": p["padding"][1],
            "stride_h": p["stride"][0], "stride_w": p["stride"][1],
            "dilate_h": p["dilation"][0], "dilate_w": p["dilation"][1]}


def _rr_decode(f):
    return {"stride": (f["stride_h"], f["stride_w"]), "padding": (f["pad_h"], f["pad_w"]),
            "dilation": (f["dilate_h"], f["dilate_w"])}


register(OpDef(
    "region_restricted_conv", eager=_rr_eager, infer=_rr_infer, lower=_rr_lower,
    params={"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1)},
    mge=MgeOpr("RegionRestrictedConvolution", "Convolution", fields=_rr_fields,
               decode=_rr_decode, match={"sparse": "GROUP"}),
    vjp=_rr_vjp,
))
