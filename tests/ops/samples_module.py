"""Samples for the convolution family of megtrace/ops/conv.py, with references written
as plain loops in float64 (definitions, not megtrace's kernels)."""
from __future__ import annotations

import itertools
import math

import numpy as np

from .samples import Sample, f32


def _conv_nd_ref(x, w, stride, padding, dilation):
    """Cross-correlation by the definition, any rank; w dense or grouped."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    if w.ndim == nd + 2:
        w = w[None]
    g, ocg, icg, *k = w.shape
    sp = x.shape[2:]
    out_sp = [(sp[i] + 2 * padding[i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1
              for i in range(nd)]
    out = np.zeros((x.shape[0], g * ocg, *out_sp))
    for gi, o in itertools.product(range(g), range(ocg)):
        for pos in itertools.product(*map(range, out_sp)):
            acc = np.zeros(x.shape[0])
            for offs in itertools.product(*map(range, k)):
                src = [pos[i] * stride[i] + offs[i] * dilation[i] - padding[i]
                       for i in range(nd)]
                if all(0 <= s < sp[i] for i, s in enumerate(src)):
                    acc += x[(slice(None), slice(gi * icg, (gi + 1) * icg), *src)] @ \
                        w[(gi, o, slice(None), *offs)]
            out[(slice(None), gi * ocg + o, *pos)] = acc
    return out


def _conv_transpose_ref(x, w, stride, padding, output_padding, dilation):
    """Every input element adds w * value at out = in * stride + k * dilation - padding."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    if w.ndim == nd + 2:
        w = w[None]
    g, icg, ocg, *k = w.shape
    sp = x.shape[2:]
    out_sp = [(sp[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k[i] - 1)
              + output_padding[i] + 1 for i in range(nd)]
    out = np.zeros((x.shape[0], g * ocg, *out_sp))
    for gi, c in itertools.product(range(g), range(icg)):
        for pos in itertools.product(*map(range, sp)):
            v = x[(slice(None), gi * icg + c, *pos)]
            for offs in itertools.product(*map(range, k)):
                dst = [pos[i] * stride[i] + offs[i] * dilation[i] - padding[i]
                       for i in range(nd)]
                if all(0 <= d < out_sp[i] for i, d in enumerate(dst)):
                    for o in range(ocg):
                        out[(slice(None), gi * ocg + o, *dst)] += v * w[(gi, c, o, *offs)]
    return out


def _local_ref(x, w, stride, padding, dilation):
    x, w = x.astype(np.float64), w.astype(np.float64)
    g, oh, ow, icg, kh, kw, ocg = w.shape
    n, c, h, wd = x.shape
    out = np.zeros((n, g * ocg, oh, ow))
    for gi, o, i, j in itertools.product(range(g), range(ocg), range(oh), range(ow)):
        for a, b in itertools.product(range(kh), range(kw)):
            r = i * stride[0] + a * dilation[0] - padding[0]
            s = j * stride[1] + b * dilation[1] - padding[1]
            if 0 <= r < h and 0 <= s < wd:
                out[:, gi * ocg + o, i, j] += \
                    x[:, gi * icg:(gi + 1) * icg, r, s] @ w[gi, i, j, :, a, b, o]
    return out


def _bilinear_at(img, y, x):
    """img (H, W) at real (y, x); corners outside the image count 0."""
    h, w = img.shape
    y0, x0 = math.floor(y), math.floor(x)
    total = 0.0
    for yy in (y0, y0 + 1):
        for xx in (x0, x0 + 1):
            if 0 <= yy < h and 0 <= xx < w:
                total += img[yy, xx] * (1 - abs(y - yy)) * (1 - abs(x - xx))
    return total


def _deform_ref(x, w, offset, mask, stride, padding, dilation):
    x, w = x.astype(np.float64), w.astype(np.float64)
    if w.ndim == 4:
        w = w[None]
    g, ocg, icg, kh, kw = w.shape
    n, c = x.shape[:2]
    oh, ow = offset.shape[2:]
    k = kh * kw
    dg = offset.shape[1] // (2 * k)
    out = np.zeros((n, g * ocg, oh, ow))
    for b, ch, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        d = ch // (c // dg)
        gi, ci = ch // icg, ch % icg
        for t, (a, bb) in enumerate(itertools.product(range(kh), range(kw))):
            dy = offset[b, d * 2 * k + 2 * t, i, j]
            dx = offset[b, d * 2 * k + 2 * t + 1, i, j]
            y = i * stride[0] - padding[0] + a * dilation[0] + dy
            xx = j * stride[1] - padding[1] + bb * dilation[1] + dx
            v = _bilinear_at(x[b, ch], y, xx) * mask[b, d * k + t, i, j]
            out[b, gi * ocg:(gi + 1) * ocg, i, j] += v * w[gi, :, ci, a, bb]
    return out


def _rr_ref(x, w, rin, rout, stride, padding, dilation):
    """Region restricted convolution by its definition: a tap counts only where the
    input pixel's region id equals the output pixel's."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    g, ocg, icg, kh, kw = w.shape
    n, c, h, wd = x.shape
    oh, ow = rout.shape[1:]
    out = np.zeros((n, g * ocg, oh, ow))
    for b, gi, i, j in itertools.product(range(n), range(g), range(oh), range(ow)):
        for a, bb in itertools.product(range(kh), range(kw)):
            r, s = i + a * dilation[0] - padding[0], j + bb * dilation[1] - padding[1]
            if 0 <= r < h and 0 <= s < wd and rin[b, r, s] == rout[b, i, j]:
                out[b, gi * ocg:(gi + 1) * ocg, i, j] += \
                    w[gi, :, :, a, bb] @ x[b, gi * icg:(gi + 1) * icg, r, s]
    return out


def _regions(dtype, ids, *shape):
    return lambda rng: rng.integers(0, ids, size=shape).astype(dtype)


def _c64(*shape):
    return lambda rng: (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(
        np.complex64)


SAMPLES = [
    Sample("create_complex", lambda rng: [f32(2, 3)(rng), f32(2, 3)(rng)],
           ref=lambda re, im: re.astype(np.float64) + 1j * im.astype(np.float64)),
    Sample("get_real", lambda rng: [_c64(3, 4)(rng)], ref=lambda z: np.real(z)),
    Sample("get_imag", lambda rng: [_c64(3, 4)(rng)], ref=lambda z: np.imag(z)),
    Sample("region_restricted_conv",
           lambda rng: [f32(2, 4, 5, 6)(rng), f32(2, 3, 2, 3, 2)(rng),
                        _regions(np.int32, 3, 2, 5, 6)(rng), _regions(np.int32, 3, 2, 5, 5)(rng)],
           {"stride": (1, 1), "padding": (1, 0), "dilation": (1, 1)},
           ref=lambda x, w, ri, ro, **p: _rr_ref(x, w, ri, ro, **p), tag="groups"),
    Sample("region_restricted_conv",
           lambda rng: [f32(1, 2, 6, 7)(rng), f32(1, 3, 2, 3, 2)(rng),
                        _regions(np.uint8, 2, 1, 6, 7)(rng), _regions(np.uint8, 2, 1, 6, 7)(rng)],
           {"stride": (1, 1), "padding": (2, 1), "dilation": (2, 2)},
           ref=lambda x, w, ri, ro, **p: _rr_ref(x, w, ri, ro, **p), tag="uint8-dilation"),
    Sample("conv3d", lambda rng: [f32(2, 3, 4, 5, 4)(rng), f32(4, 3, 2, 3, 2)(rng)],
           {"stride": (1, 2, 1), "padding": (1, 0, 1), "dilation": (1, 1, 2)},
           ref=lambda x, w, **p: _conv_nd_ref(x, w, **p), tag="dense"),
    Sample("conv3d", lambda rng: [f32(1, 4, 4, 4, 4)(rng), f32(2, 3, 2, 2, 2, 2)(rng)],
           {"stride": (1, 1, 1), "padding": (1, 1, 1), "dilation": (1, 1, 1)},
           ref=lambda x, w, **p: _conv_nd_ref(x, w, **p), tag="groups"),
    Sample("conv_transpose2d", lambda rng: [f32(2, 3, 4, 5)(rng), f32(3, 2, 3, 2)(rng)],
           {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2),
            "dilation": (1, 1)},
           ref=lambda x, w, **p: _conv_transpose_ref(x, w, **p), tag="output-padding"),
    Sample("conv_transpose2d", lambda rng: [f32(1, 4, 3, 3)(rng), f32(2, 2, 3, 3, 3)(rng)],
           {"stride": (2, 2), "padding": (1, 1), "output_padding": (0, 0),
            "dilation": (2, 1)},
           ref=lambda x, w, **p: _conv_transpose_ref(x, w, **p), tag="groups-dilation"),
    Sample("conv_transpose3d", lambda rng: [f32(1, 2, 3, 2, 3)(rng), f32(2, 3, 2, 2, 3)(rng)],
           {"stride": (2, 1, 2), "padding": (0, 1, 1), "output_padding": (1, 0, 0),
            "dilation": (1, 1, 1)},
           ref=lambda x, w, **p: _conv_transpose_ref(x, w, **p), tag="dense"),
    Sample("local_conv2d", lambda rng: [f32(2, 4, 5, 6)(rng), f32(2, 5, 6, 2, 3, 3, 3)(rng)],
           {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)},
           ref=lambda x, w, **p: _local_ref(x, w, **p), tag="groups"),
    Sample("local_conv2d", lambda rng: [f32(1, 2, 7, 8)(rng), f32(1, 3, 3, 2, 2, 3, 3)(rng)],
           {"stride": (2, 2), "padding": (0, 0), "dilation": (2, 1)},
           ref=lambda x, w, **p: _local_ref(x, w, **p), tag="stride-dilation"),
    Sample("deformable_conv2d",
           lambda rng: [f32(2, 4, 5, 5)(rng), f32(3, 4, 3, 3)(rng), f32(2, 18, 5, 5, lo=-2, hi=2)(rng),
                        f32(2, 9, 5, 5, lo=0, hi=1)(rng)],
           {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)},
           ref=lambda x, w, o, m, **p: _deform_ref(x, w, o, m, **p), tag="dense"),
    Sample("deformable_conv2d",
           lambda rng: [f32(1, 4, 6, 6)(rng), f32(2, 2, 2, 2, 2)(rng), f32(1, 16, 2, 2, lo=-3, hi=3)(rng),
                        f32(1, 8, 2, 2)(rng)],
           {"stride": (2, 2), "padding": (0, 0), "dilation": (2, 2)},
           ref=lambda x, w, o, m, **p: _deform_ref(x, w, o, m, **p), tag="groups-2-deformable"),
]

BAD = [
    ("region_restricted_conv", [(1, 2, 5, 5), (2, 1, 1, 3, 3), (1, 5, 5), (1, 4, 3)], {},
     "ShapeError", "rout"),
    ("region_restricted_conv", [(1, 2, 5, 5), (2, 1, 3, 3), (1, 5, 5), (1, 3, 3)], {},
     "ShapeError", "5-d"),
    ("conv3d", [(1, 3, 4, 4, 4), (2, 2, 2, 2, 2)], {}, "ShapeError", "channels"),
    ("conv3d", [(1, 3, 4, 4), (2, 3, 2, 2, 2)], {}, "ShapeError", "5-d"),
    ("conv_transpose2d", [(1, 3, 4, 4), (2, 2, 3, 3)], {}, "ShapeError", "channels"),
    ("conv_transpose3d", [(1, 2, 4, 4), (2, 2, 3, 3, 3)], {}, "ShapeError", "5-d"),
    ("local_conv2d", [(1, 2, 5, 5), (1, 4, 4, 2, 3, 3, 2)], {}, "ShapeError", "output"),
    ("local_conv2d", [(1, 2, 5, 5), (1, 3, 3, 2, 3, 3)], {}, "ShapeError", "7-d"),
    ("deformable_conv2d", [(1, 2, 5, 5), (2, 2, 3, 3), (1, 17, 3, 3), (1, 9, 3, 3)], {},
     "ShapeError", "offset"),
    ("deformable_conv2d", [(1, 2, 5, 5), (2, 2, 3, 3), (1, 18, 3, 3), (1, 8, 3, 3)], {},
     "ShapeError", "mask"),
]
