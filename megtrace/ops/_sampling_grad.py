"""Gradient of `_sampling.sample_np` (bilinear/nearest taps with OpenCV border rules)
built from Tensor operations, for the VJPs of warp_perspective, warp_affine and remap:
the image's gradient adds each output's weighted gradient onto its taps
(IndexingIncrMultiAxisVec, MegEngine's *BackwardData), the coordinates' gradient is the
derivative of the tap weights (MegEngine's *BackwardMat).

Index arithmetic runs on float32 tensors holding integers (exact below 2**24) and is cast
to int32 for the gathers, so no rule needs integer-tensor modulo semantics.
"""
from __future__ import annotations


def _border_index(V, p, n: int, mode: str):
    """(index within [0, n) as float, validity mask for CONSTANT or None)."""
    if mode in ("REPLICATE", "CONSTANT") or n == 1:
        index = V.apply("clip", p, lower=0.0, upper=float(n - 1))
        if mode != "CONSTANT":
            return index, None
        valid = V.apply("logical_and", V.apply("ge", p, V.const(0, p)),
                        V.apply("lt", p, V.const(n, p)))
        return index, valid
    period = n if mode == "WRAP" else 2 * n - 2 * (1 if mode == "REFLECT_101" else 0)
    m = p - V.apply("floor", p / V.const(period, p)) * V.const(period, p)
    if mode == "WRAP":
        return m, None
    edge = 1 if mode == "REFLECT_101" else 0
    return V.apply("where", V.apply("ge", m, V.const(n, m)),
                   V.const(period - 1 + edge, m) - m, m), None


def sample_grads(V, src, batch, xs, ys, g, *, border: str, border_val: float,
                 nearest: bool = False, want_src: bool = True, want_coords: bool = True):
    """src (N, C, H, W); batch float32 (M, 1, 1) image per output; xs, ys (M, OH, OW);
    g (M, C, OH, OW) the output's gradient. Returns (gsrc, gxs, gys), None where not
    wanted (coordinates get none under nearest sampling)."""
    n, c, h, w = src.shape
    rows = V.apply("reshape", V.apply("transpose", src, pattern=(0, 2, 3, 1)),
                   shape=(n * h * w, c))
    gout = V.apply("transpose", g, pattern=(0, 2, 3, 1))           # (M, OH, OW, C)
    base = batch * V.const(h * w, xs)
    taps_info = []

    def tap(iy, ix):
        ry, vy = _border_index(V, iy, h, border)
        rx, vx = _border_index(V, ix, w, border)
        flat = V.apply("astype", base + ry * V.const(w, ry) + rx, dtype="int32")
        valid = None if vy is None else V.apply("logical_and", vy, vx)
        return flat, valid

    if nearest:
        half = V.const(0.5, xs)
        taps_info.append(tap(V.apply("floor", ys + half), V.apply("floor", xs + half))
                         + (None,))
        weights = [None]
    else:
        fx, fy = V.apply("floor", xs), V.apply("floor", ys)
        ax, ay = xs - fx, ys - fy
        one = V.const(1, xs)
        bx, by = one - ax, one - ay
        for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
            taps_info.append(tap(fy + V.const(dy, fy), fx + V.const(dx, fx)) + (None,))
        weights = [bx * by, ax * by, bx * ay, ax * ay]

    gsrc = gxs = gys = None
    if want_src:
        acc = V.apply("broadcast_to", V.const(0, rows), shape=(n * h * w, c))
        for (flat, valid, _), wt in zip(taps_info, weights):
            share = gout if wt is None else gout * V.apply("expand_dims", wt, axis=(3,))
            if valid is not None:
                share = V.select(V.apply("expand_dims", valid, axis=(3,)), share)
            acc = V.apply("indexing_incr_multi_axis_vec", acc, share, flat, axes=(0,))
        gsrc = V.apply("transpose", V.apply("reshape", acc, shape=(n, h, w, c)),
                       pattern=(0, 3, 1, 2))
    if want_coords and not nearest:
        vals = []
        for flat, valid, _ in taps_info:
            v = V.apply("indexing_multi_axis_vec", rows, flat, axes=(0,))   # (M, OH, OW, C)
            if valid is not None:
                v = V.apply("where", V.apply("expand_dims", valid, axis=(3,)), v,
                            V.const(border_val, v))
            vals.append(V.apply("reduce", v * gout, mode="sum", axis=(3,), keepdims=False))
        v00, v01, v10, v11 = vals
        gxs = (v01 - v00) * by + (v11 - v10) * ay
        gys = (v10 - v00) * bx + (v11 - v01) * ax
    elif want_coords:
        gxs, gys = V.zeros_like(xs), V.zeros_like(ys)
    return gsrc, gxs, gys


def sample_values(V, src, batch, xs, ys, *, border: str, border_val: float):
    """The bilinear samples themselves (M, C, OH, OW), from Tensor operations (for rules
    that need the forward values, as max pooling over samples does)."""
    n, c, h, w = src.shape
    rows = V.apply("reshape", V.apply("transpose", src, pattern=(0, 2, 3, 1)),
                   shape=(n * h * w, c))
    base = batch * V.const(h * w, xs)
    fx, fy = V.apply("floor", xs), V.apply("floor", ys)
    ax, ay = xs - fx, ys - fy
    one = V.const(1, xs)
    total = None
    for (dy, dx), wt in zip(((0, 0), (0, 1), (1, 0), (1, 1)),
                            ((one - ax) * (one - ay), ax * (one - ay), (one - ax) * ay, ax * ay)):
        ry, vy = _border_index(V, fy + V.const(dy, fy), h, border)
        rx, vx = _border_index(V, fx + V.const(dx, fx), w, border)
        flat = V.apply("astype", base + ry * V.const(w, ry) + rx, dtype="int32")
        v = V.apply("indexing_multi_axis_vec", rows, flat, axes=(0,))
        if vy is not None:
            v = V.apply("where", V.apply("expand_dims", V.apply("logical_and", vy, vx),
                                         axis=(3,)), v, V.const(border_val, v))
        term = v * V.apply("expand_dims", wt, axis=(3,))
        total = term if total is None else total + term
    return V.apply("transpose", total, pattern=(0, 3, 1, 2))
