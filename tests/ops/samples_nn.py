"""Samples for the image/vision ops (resize, warp_perspective, remap, ...): references
written pixel by pixel from MegEngine's documented semantics, in float64."""
from __future__ import annotations

import math

import numpy as np

from .samples import Sample, f32


def _border(p: int, n: int, mode: str) -> int:
    """OpenCV's borderInterpolate, step by step; -1 means "use the border value"."""
    if 0 <= p < n:
        return p
    if mode == "REPLICATE":
        return 0 if p < 0 else n - 1
    if mode == "CONSTANT":
        return -1
    if mode == "WRAP":
        while p < 0:
            p += n
        return p % n
    delta = 1 if mode == "REFLECT_101" else 0
    if n == 1:
        return 0
    while not 0 <= p < n:
        p = -p - 1 + delta if p < 0 else n - 1 - (p - n) - delta
    return p


def _bilinear_at(img, y: float, x: float, mode: str, fill: float) -> np.ndarray:
    """img (C, H, W); value at (y, x) from the four taps around it."""
    h, w = img.shape[1:]
    y0, x0 = math.floor(y), math.floor(x)
    ay, ax = y - y0, x - x0
    total = np.zeros(img.shape[0])
    for dy, wy in ((0, 1 - ay), (1, ay)):
        for dx, wx in ((0, 1 - ax), (1, ax)):
            r, c = _border(y0 + dy, h, mode), _border(x0 + dx, w, mode)
            tap = img[:, r, c] if r >= 0 and c >= 0 else np.full(img.shape[0], fill)
            total += tap * wy * wx
    return total


def _resize_linear_ref(x, size, **_):
    n, c, h, w = x.shape
    out = np.zeros((n, c) + tuple(size))
    for i in range(size[0]):
        for j in range(size[1]):
            sy = min(max((i + 0.5) * h / size[0] - 0.5, 0), h - 1)
            sx = min(max((j + 0.5) * w / size[1] - 0.5, 0), w - 1)
            for b in range(n):
                out[b, :, i, j] = _bilinear_at(x[b].astype(np.float64), sy, sx, "REPLICATE", 0)
    return out


def _resize_nearest_ref(x, size, **_):
    n, c, h, w = x.shape
    rows = [min(i * h // size[0], h - 1) for i in range(size[0])]
    cols = [min(j * w // size[1], w - 1) for j in range(size[1])]
    return x[:, :, rows][:, :, :, cols]


def _keys_cubic(d: float, a: float = -0.75) -> float:
    d = abs(d)
    if d <= 1:
        return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    if d < 2:
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
    return 0.0


def _resize_cubic_ref(x, size, **_):
    n, c, h, w = x.shape
    out = np.zeros((n, c) + tuple(size))
    for i in range(size[0]):
        sy = (i + 0.5) * h / size[0] - 0.5
        for j in range(size[1]):
            sx = (j + 0.5) * w / size[1] - 0.5
            for ky in range(math.floor(sy) - 1, math.floor(sy) + 3):
                for kx in range(math.floor(sx) - 1, math.floor(sx) + 3):
                    weight = _keys_cubic(sy - ky) * _keys_cubic(sx - kx)
                    out[:, :, i, j] += weight * x[:, :, min(max(ky, 0), h - 1),
                                                  min(max(kx, 0), w - 1)]
    return out


def _warp_ref(x, mat, mat_idx=None, *, out, border="REPLICATE", border_val=0.0,
              format="NCHW"):
    """Exact, except NHWC with 1-3 channels: sources rounded (half to even) to 1/32 pixel,
    as OpenCV's warpPerspective computes them."""
    fixed = format == "NHWC" and x.shape[3] <= 3
    if format != "NCHW":
        x = x.transpose(0, 3, 1, 2)
    res = np.zeros((mat.shape[0], x.shape[1]) + tuple(out))
    for k, m in enumerate(mat.astype(np.float64)):
        img = x[k if mat_idx is None else mat_idx[k]].astype(np.float64)
        for i in range(out[0]):
            for j in range(out[1]):
                d = m[2, 0] * j + m[2, 1] * i + m[2, 2]
                sx = (m[0, 0] * j + m[0, 1] * i + m[0, 2]) / d
                sy = (m[1, 0] * j + m[1, 1] * i + m[1, 2]) / d
                if fixed:
                    sx, sy = round(sx * 32) / 32, round(sy * 32) / 32
                res[k, :, i, j] = _bilinear_at(img, sy, sx, border, border_val)
    return res.transpose(0, 2, 3, 1) if format == "NHWC" else res


def _remap_ref(x, map_xy, *, border="REPLICATE", scalar=0.0, nearest=False):
    n, c = x.shape[:2]
    res = np.zeros((n, c) + map_xy.shape[1:3])
    for b in range(n):
        img = x[b].astype(np.float64)
        for i in range(map_xy.shape[1]):
            for j in range(map_xy.shape[2]):
                sx, sy = (float(v) for v in map_xy[b, i, j])
                if nearest:
                    r = _border(math.floor(sy + 0.5), x.shape[2], border)
                    col = _border(math.floor(sx + 0.5), x.shape[3], border)
                    res[b, :, i, j] = img[:, r, col] if r >= 0 and col >= 0 else scalar
                else:
                    res[b, :, i, j] = _bilinear_at(img, sy, sx, border, scalar)
    return res


def _perspective(n: int):
    def make(rng):
        m = np.tile(np.eye(3), (n, 1, 1))
        m[:, :2, :2] += rng.uniform(-0.2, 0.2, size=(n, 2, 2))
        m[:, :2, 2] = rng.uniform(-2, 2, size=(n, 2))
        m[:, 2, :2] = rng.uniform(-0.04, 0.04, size=(n, 2))
        return m.astype(np.float32)
    return make


def _u8(*shape):
    return lambda rng: rng.integers(0, 256, size=shape).astype(np.uint8)


def _translation(rng):
    return np.array([[[1, 0, 1], [0, 1, 1], [0, 0, 1]]], np.float32)


def _pick_ref(src, index, axis):
    out = np.zeros(index.shape, src.dtype)
    for pos in np.ndindex(*index.shape):
        out[pos] = src[pos[:axis] + (index[pos],) + pos[axis:]]
    return np.expand_dims(out, axis)


def _window_ref(x, window, padding, stride, dilation):
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]), x.dtype)
    xp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w] = x
    oh = (xp.shape[2] - dilation[0] * (window[0] - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dilation[1] * (window[1] - 1) - 1) // stride[1] + 1
    out = np.zeros((n, c, oh, ow) + tuple(window), x.dtype)
    for i, j, a, b in np.ndindex(oh, ow, *window):
        out[:, :, i, j, a, b] = xp[:, :, i * stride[0] + a * dilation[0],
                                   j * stride[1] + b * dilation[1]]
    return out


def _window_transpose_ref(x, out, window, padding, stride, dilation):
    n, c, oh, ow = x.shape[:4]
    img = np.zeros((n, c) + tuple(out))
    for i, j, a, b in np.ndindex(oh, ow, *window):
        r = i * stride[0] - padding[0] + a * dilation[0]
        q = j * stride[1] - padding[1] + b * dilation[1]
        if 0 <= r < out[0] and 0 <= q < out[1]:
            img[:, :, r, q] += x[:, :, i, j, a, b]
    return img


def _affine_nearest_ref(x, mat, *, out, imode):
    """OpenCV's nearest warpAffine (NHWC, REPLICATE): sources rounded at 1/1024 pixel."""
    res = np.zeros((mat.shape[0],) + tuple(out) + (x.shape[3],), x.dtype)
    for k, m in enumerate(mat.astype(np.float64)):
        for i in range(out[0]):
            for j in range(out[1]):
                sx = (round(m[0, 0] * j * 1024) + round((m[0, 1] * i + m[0, 2]) * 1024) + 512)
                sy = (round(m[1, 0] * j * 1024) + round((m[1, 1] * i + m[1, 2]) * 1024) + 512)
                res[k, i, j] = x[k, min(max(sy >> 10, 0), x.shape[1] - 1),
                                 min(max(sx >> 10, 0), x.shape[2] - 1)]
    return res


def _affine_ref(x, mat, *, out, border="REPLICATE", border_val=0.0, format="NHWC"):
    """Exact, except NHWC with 1-3 channels: sources at 1/32 pixel, as OpenCV's warpAffine
    computes them."""
    img = x.transpose(0, 3, 1, 2) if format == "NHWC" else x
    res = np.zeros((mat.shape[0], img.shape[1]) + tuple(out))
    for k, m in enumerate(mat.astype(np.float64)):
        for i in range(out[0]):
            for j in range(out[1]):
                if format == "NHWC" and x.shape[3] <= 3:
                    fx = (round(m[0, 0] * j * 1024) + round((m[0, 1] * i + m[0, 2]) * 1024) + 16)
                    fy = (round(m[1, 0] * j * 1024) + round((m[1, 1] * i + m[1, 2]) * 1024) + 16)
                    sx, sy = (fx // 32) / 32, (fy // 32) / 32
                else:
                    sx = m[0, 0] * j + m[0, 1] * i + m[0, 2]
                    sy = m[1, 0] * j + m[1, 1] * i + m[1, 2]
                res[k, :, i, j] = _bilinear_at(img[k].astype(np.float64), sy, sx, border,
                                               border_val)
    return res.transpose(0, 2, 3, 1) if format == "NHWC" else res


def _cvt_ref(x, mode):
    x = x.astype(np.float64)
    luma = np.array([0.299, 0.587, 0.114])
    if mode == "RGB2GRAY":
        return x @ luma[:, None]
    if mode == "BGR2GRAY":
        return x @ luma[::-1, None]
    if mode == "GRAY2RGB":
        return np.repeat(x, 3, axis=-1)
    if mode == "RGB2YUV":      # megdnn weighs channel 0 by 0.114 (BGR-ordered luma)
        y = x @ luma[::-1]
        return np.stack([y, (x[..., 0] - y) * 0.492 + 0.5, (x[..., 2] - y) * 0.877 + 0.5], -1)
    y, u, v = x[..., 0], x[..., 1] - 0.5, x[..., 2] - 0.5
    return np.stack([y + 2.032 * u, y - 0.395 * u - 0.581 * v, y + 1.14 * v], -1)


def _gray_u8_ref(x, mode):
    r, g, b = (x[..., i].astype(np.int64) for i in ((0, 1, 2) if mode == "RGB2GRAY" else (2, 1, 0)))
    return ((r * 4899 + g * 9617 + b * 1868 + 8192) >> 14)[..., None]


def _bilinear_zero(img, y, x):
    h, w = img.shape[1:]
    y0, x0 = math.floor(y), math.floor(x)
    total = np.zeros(img.shape[0])
    for dy, wy in ((0, 1 - (y - y0)), (1, y - y0)):
        for dx, wx in ((0, 1 - (x - x0)), (1, x - x0)):
            if 0 <= y0 + dy < h and 0 <= x0 + dx < w:
                total += img[:, y0 + dy, x0 + dx] * wy * wx
    return total


def _roi_align_ref(x, rois, *, mode, pooled, samples, spatial_scale, offset):
    res = np.zeros((rois.shape[0], x.shape[1]) + tuple(pooled))
    for k, roi in enumerate(rois.astype(np.float64)):
        img = x[int(roi[0])].astype(np.float64)
        x0, y0, x1, y1 = roi[1:] * spatial_scale - offset
        bh, bw = max(y1 - y0, 0) / pooled[0], max(x1 - x0, 0) / pooled[1]
        for i in range(pooled[0]):
            for j in range(pooled[1]):
                vals = [_bilinear_zero(img, y0 + bh * (i + (a + 0.5) / samples[0]),
                                       x0 + bw * (j + (b + 0.5) / samples[1]))
                        for a in range(samples[0]) for b in range(samples[1])]
                res[k, :, i, j] = np.max(vals, 0) if mode == "max" else np.mean(vals, 0)
    return res


def _roi_pool_ref(x, rois, *, mode, pooled, scale):
    res = np.zeros((rois.shape[0], x.shape[1]) + tuple(pooled))
    h, w = x.shape[2:]
    for k, roi in enumerate(rois.astype(np.float64)):
        x0, y0, x1, y1 = (int(math.floor(v * scale + 0.5)) for v in roi[1:])
        rh, rw = max(y1 - y0 + 1, 1), max(x1 - x0 + 1, 1)
        for i in range(pooled[0]):
            hs = min(max(math.floor(i * rh / pooled[0]) + y0, 0), h)
            he = min(max(math.ceil((i + 1) * rh / pooled[0]) + y0, 0), h)
            for j in range(pooled[1]):
                ws = min(max(math.floor(j * rw / pooled[1]) + x0, 0), w)
                we = min(max(math.ceil((j + 1) * rw / pooled[1]) + x0, 0), w)
                if he > hs and we > ws:
                    cell = x[int(roi[0]), :, hs:he, ws:we].astype(np.float64)
                    res[k, :, i, j] = cell.max((1, 2)) if mode == "max" else cell.mean((1, 2))
    return res


def _nms_ref(boxes, *, iou_thresh, max_output):
    b = boxes.astype(np.float64)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    kept = []
    for i in range(len(b)):
        if len(kept) == max_output:
            break
        ok = True
        for j in kept:
            iw = max(min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]), 0)
            ih = max(min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]), 0)
            if iw * ih > (area[i] + area[j] - iw * ih) * iou_thresh:
                ok = False
        if ok:
            kept.append(i)
    padded = kept + [kept[-1] if kept else 0] * (max_output - len(kept))
    return np.array(padded, np.int32), np.array([len(kept)], np.int32)


def _dpsroi_ref(x, rois, trans, *, no_trans, part_size, pooled, sample_per_part,
                spatial_scale, trans_std):
    k, c, h, w = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
    res = np.zeros((k, c) + tuple(pooled))
    for n, roi in enumerate(rois.astype(np.float64)):
        x0, y0, x1, y1 = (math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1) for v in roi[1:])
        wl, hl = x0 * spatial_scale - 0.5, y0 * spatial_scale - 0.5
        rw = max((x1 + 1) * spatial_scale - 0.5 - wl, 0.1)
        rh = max((y1 + 1) * spatial_scale - 0.5 - hl, 0.1)
        for ch, i, j in np.ndindex(c, *pooled):
            dx = dy = 0.0
            if not no_trans:
                ph, pw = int(i * part_size / pooled[0]), int(j * part_size / pooled[1])
                dx, dy = trans[n, 0, ph, pw] * trans_std, trans[n, 1, ph, pw] * trans_std
            vals = []
            for a, b in np.ndindex(sample_per_part, sample_per_part):
                sx = j * rw / pooled[1] + wl + dx * rw + b * rw / pooled[1] / sample_per_part
                sy = i * rh / pooled[0] + hl + dy * rh + a * rh / pooled[0] / sample_per_part
                if -0.5 <= sx <= w - 0.5 and -0.5 <= sy <= h - 0.5:
                    sx, sy = min(max(sx, 0), w - 1), min(max(sy, 0), h - 1)
                    vals.append(_bilinear_at(x[int(roi[0]), ch:ch + 1].astype(np.float64),
                                             sy, sx, "REPLICATE", 0)[0])
            res[n, ch, i, j] = np.mean(vals) if vals else 0.0
    return res


def _rois(rng):
    return np.array([[0, 1.2, 2.3, 9.1, 13.5], [1, 0.0, 0.0, 11.0, 15.0],
                     [1, 4.4, 3.3, 6.1, 5.7], [0, -2.0, 3.0, 5.0, 20.0]], np.float32)


def _boxes(rng):
    xy = rng.uniform(0, 20, size=(12, 2))
    return np.concatenate([xy, xy + rng.uniform(3, 12, size=(12, 2))], 1).astype(np.float32)


_WINDOW = {"window": (3, 2), "padding": (1, 2), "stride": (2, 1), "dilation": (1, 3)}


SAMPLES = [
    Sample("indexing_one_hot", lambda rng: [f32(3, 4, 5)(rng),
                                            rng.integers(0, 4, (3, 5)).astype(np.int32)],
           {"axis": 1}, ref=_pick_ref),
    Sample("indexing_one_hot", lambda rng: [f32(6, 3)(rng),
                                            rng.integers(0, 3, (6,)).astype(np.int32)],
           {"axis": 1}, ref=_pick_ref, tag="2d"),
    Sample("one_hot", lambda rng: [rng.integers(0, 5, (2, 4)).astype(np.int32)],
           {"num_classes": 5}, ref=lambda i, num_classes: np.eye(num_classes, dtype=i.dtype)[i]),
    Sample("sliding_window", lambda rng: [f32(2, 3, 7, 8)(rng)], _WINDOW, ref=_window_ref),
    Sample("sliding_window", lambda rng: [f32(1, 2, 5, 5)(rng)],
           {"window": (3, 3), "padding": (0, 0), "stride": (1, 1), "dilation": (1, 1)},
           ref=_window_ref, tag="plain"),
    Sample("sliding_window_transpose", lambda rng: [f32(2, 3, 4, 9, 3, 2)(rng)],
           {"out": (7, 8), **_WINDOW}, ref=_window_transpose_ref),

    Sample("resize", lambda rng: [f32(1, 2, 4, 5)(rng)], {"size": (7, 3), "mode": "linear"},
           ref=_resize_linear_ref, tag="linear"),
    Sample("resize", lambda rng: [f32(2, 1, 6, 3)(rng)], {"size": (4, 8), "mode": "linear"},
           ref=_resize_linear_ref, tag="linear-mixed"),
    Sample("resize", lambda rng: [f32(1, 2, 3, 4)(rng)], {"size": (6, 8), "mode": "nearest"},
           ref=_resize_nearest_ref, tag="nearest-x2"),
    Sample("resize", lambda rng: [f32(1, 2, 5, 6)(rng)], {"size": (3, 4), "mode": "nearest"},
           ref=_resize_nearest_ref, tag="nearest-down"),
    Sample("resize", lambda rng: [f32(1, 2, 4, 5)(rng)], {"size": (7, 9), "mode": "cubic"},
           ref=_resize_cubic_ref, tag="cubic-up"),
    Sample("resize", lambda rng: [f32(1, 1, 7, 6)(rng)], {"size": (3, 4), "mode": "cubic"},
           ref=_resize_cubic_ref, tag="cubic-down"),
    Sample("warp_perspective", lambda rng: [f32(2, 3, 5, 6)(rng), _perspective(2)(rng)],
           {"out": (4, 7)}, ref=_warp_ref, tag="replicate"),
    *[Sample("warp_perspective", lambda rng: [f32(1, 2, 5, 4)(rng), _perspective(1)(rng)],
             {"out": (6, 5), "border": mode, "border_val": 0.25},
             ref=_warp_ref, tag=mode.lower())
      for mode in ("CONSTANT", "REFLECT", "REFLECT_101", "WRAP")],
    Sample("warp_perspective", lambda rng: [f32(2, 2, 4, 4)(rng), _perspective(3)(rng),
                                            np.array([1, 0, 1], np.int32)],
           {"out": (3, 5)}, ref=_warp_ref, tag="mat_idx"),
    Sample("warp_perspective", lambda rng: [_u8(1, 1, 4, 4)(rng), _translation(rng)],
           {"out": (2, 2)}, ref=lambda x, m, out, **p: x[:, :, 1:3, 1:3], tag="uint8"),
    Sample("warp_perspective", lambda rng: [f32(2, 5, 6, 3)(rng), _perspective(3)(rng),
                                            np.array([1, 0, 1], np.int32)],
           {"out": (4, 7), "border": "REFLECT", "format": "NHWC"}, ref=_warp_ref,
           tag="nhwc"),
    Sample("warp_perspective", lambda rng: [f32(1, 5, 6, 4)(rng), _perspective(1)(rng)],
           {"out": (3, 7), "border": "CONSTANT", "border_val": 0.5, "format": "NHWC"},
           ref=_warp_ref, tag="nhwc-4-channels"),
    Sample("remap", lambda rng: [f32(2, 3, 4, 5)(rng), f32(2, 3, 6, 2, lo=-2, hi=6)(rng)],
           {}, ref=_remap_ref, tag="replicate"),
    *[Sample("remap", lambda rng: [f32(1, 2, 4, 5)(rng), f32(1, 3, 4, 2, lo=-3, hi=7)(rng)],
             {"border": mode, "scalar": 0.5}, ref=_remap_ref, tag=mode.lower())
      for mode in ("CONSTANT", "REFLECT", "REFLECT_101", "WRAP")],
    Sample("remap", lambda rng: [f32(1, 2, 4, 5)(rng), f32(1, 3, 4, 2, lo=-1, hi=5)(rng)],
           {"nearest": True}, ref=_remap_ref, tag="nearest"),
]

SAMPLES += [
    Sample("warp_affine", lambda rng: [f32(2, 5, 6, 3)(rng), _perspective(2)(rng)[:, :2]],
           {"out": (4, 7)}, ref=_affine_ref, tag="nhwc"),
    Sample("warp_affine", lambda rng: [f32(1, 5, 6, 4)(rng), _perspective(1)(rng)[:, :2]],
           {"out": (3, 7)}, ref=_affine_ref, tag="nhwc-4-channels"),
    Sample("warp_affine", lambda rng: [f32(2, 5, 6, 3)(rng), _perspective(2)(rng)[:, :2]],
           {"out": (4, 7), "imode": "NEAREST"}, ref=_affine_nearest_ref, tag="nhwc-nearest"),
    *[Sample("warp_affine", lambda rng: [f32(1, 2, 5, 4)(rng), _perspective(1)(rng)[:, :2]],
             {"out": (6, 5), "border": mode, "border_val": 0.25, "format": "NCHW"},
             ref=_affine_ref, tag=f"nchw-{mode.lower()}")
      for mode in ("REPLICATE", "CONSTANT", "WRAP")],
    *[Sample("cvt_color", lambda rng, c=1 if m == "GRAY2RGB" else 3: [f32(2, 3, 4, c, lo=0)(rng)],
             {"mode": m}, ref=_cvt_ref, tag=m)
      for m in ("RGB2GRAY", "BGR2GRAY", "RGB2YUV", "YUV2RGB", "GRAY2RGB")],
    *[Sample("cvt_color", lambda rng: [_u8(2, 3, 4, 3)(rng)], {"mode": m}, ref=_gray_u8_ref,
             tag=f"u8-{m}") for m in ("RGB2GRAY", "BGR2GRAY")],
    Sample("cvt_color", lambda rng: [_u8(1, 2, 2, 4)(rng)], {"mode": "RGBA2BGR"},
           ref=lambda x, mode: x[..., [2, 1, 0]], tag="u8-RGBA2BGR"),
    Sample("roi_align", lambda rng: [f32(2, 3, 16, 12)(rng), _rois(rng)],
           {"mode": "average", "pooled": (3, 4), "samples": (2, 2), "spatial_scale": 0.5,
            "offset": 0.5}, ref=_roi_align_ref, tag="average"),
    Sample("roi_align", lambda rng: [f32(2, 3, 16, 12)(rng), _rois(rng)],
           {"mode": "max", "pooled": (2, 3), "samples": (3, 2), "spatial_scale": 0.75,
            "offset": 0.0}, ref=_roi_align_ref, tag="max"),
    Sample("roi_pooling", lambda rng: [f32(2, 3, 16, 12)(rng), _rois(rng)],
           {"mode": "max", "pooled": (3, 2), "scale": 0.5}, ref=_roi_pool_ref, tag="max"),
    Sample("roi_pooling", lambda rng: [f32(2, 3, 16, 12)(rng), _rois(rng)],
           {"mode": "average", "pooled": (3, 3), "scale": 0.7}, ref=_roi_pool_ref,
           tag="average"),
    *[Sample("deformable_psroi_pooling",
             lambda rng: [f32(2, 4, 12, 10)(rng),
                          np.array([[0, 1.4, 2.6, 30.2, 40.7], [1, 10, 4, 20, 9]], np.float32),
                          f32(2, 2, 3, 3)(rng)],
             {"no_trans": no_trans, "part_size": 3, "pooled": (3, 3), "sample_per_part": 3,
              "spatial_scale": 0.25, "trans_std": 0.1}, ref=_dpsroi_ref,
             tag="no_trans" if no_trans else "trans") for no_trans in (True, False)],
    Sample("nms_keep", lambda rng: [_boxes(rng)], {"iou_thresh": 0.3, "max_output": 12},
           ref=_nms_ref),
    Sample("nms_keep", lambda rng: [_boxes(rng)], {"iou_thresh": 0.5, "max_output": 3},
           ref=_nms_ref, tag="max_output"),
]

BAD = [
    ("warp_affine", [(1, 4, 4, 3), (1, 3, 3)], {"out": (2, 2)}, "ShapeError", "(1, 2, 3)"),
    ("cvt_color", [(1, 4, 4, 2)], {"mode": "RGB2GRAY"}, "ShapeError", "3 channels"),
    ("roi_align", [(1, 2, 4, 4), (3, 4)], {}, "ShapeError", "rois"),
    ("nms_keep", [(5, 3)], {}, "ShapeError", "(N, 4)"),
    ("sliding_window", [(1, 2, 3)], {}, "ShapeError", "4-d"),
    ("sliding_window", [(1, 2, 2, 2)], {"window": (3, 3)}, "ShapeError", "does not fit"),
    ("sliding_window_transpose", [(1, 2, 3, 3, 3, 3)], {"out": (6, 6)}, "ShapeError",
     "does not match"),
    ("resize", [(1, 2, 3)], {"size": (2, 2)}, "ShapeError", "4-d"),
    ("resize", [(1, 2, 3, 4)], {"size": (0, 2)}, "ShapeError", "positive"),
    ("warp_perspective", [(1, 2, 3, 4), (1, 2, 3)], {"out": (2, 2)}, "ShapeError", "(batch, 3, 3)"),
    ("warp_perspective", [(2, 2, 3, 4), (3, 3, 3)], {"out": (2, 2)}, "ShapeError", "mat_idx"),
    ("remap", [(1, 2, 3, 4), (1, 5, 5, 3)], {}, "ShapeError", "map_xy"),
]
