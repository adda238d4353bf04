"""Pooling and spatial reductions that read NCHW16c directly, so that a blocked conv
output does not have to be unpacked first (an unpack costs about a conv's 5-9 %).

Both vectorise over the 16 channels of a block and run the pixel rows in parallel.
"""
from __future__ import annotations

from .._tvm import tvm
from .layout import BLOCK
from .primfunc import parallel_if, scheduled_func, vectorize_inner

POOL_MODES = ("max", "average", "average_count_exclude_padding")
REDUCE_MODES = ("sum", "mean", "max", "min")


def pool_nchwc(shape: tuple[int, int, int, int], mode: str, kernel: tuple[int, int],
               stride: tuple[int, int], padding: tuple[int, int]):
    """Scheduled PrimFunc (x blocked, out blocked) for megtrace's pool2d modes."""
    te, t = tvm().te, tvm().tirx
    if mode not in POOL_MODES:
        raise ValueError(f"pool_nchwc: mode {mode!r} is not one of {POOL_MODES}")
    n, c, h, w = shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    cb = -(-c // BLOCK)
    x = te.placeholder((n, cb, h, w, BLOCK), "float32", name="x")
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    zero = t.const(0.0, "float32")

    def tap(i, cc, y, z, ci, fill):
        yy, zz = y * sh + rh - ph, z * sw + rw - pw
        inside = t.all(yy >= 0, yy < h, zz >= 0, zz < w)
        return te.if_then_else(inside, x[i, cc, yy, zz, ci], t.const(fill, "float32"))

    if mode == "max":
        full = te.compute((n, cb, oh, ow, BLOCK), lambda i, cc, y, z, ci: te.max(
            tap(i, cc, y, z, ci, float("-inf")), axis=[rh, rw]), name="pool")
    else:
        full = te.compute((n, cb, oh, ow, BLOCK), lambda i, cc, y, z, ci: te.sum(
            tap(i, cc, y, z, ci, 0.0), axis=[rh, rw]), name="pool")

    def count(y, z):
        if mode != "average_count_exclude_padding":
            return t.const(float(kh * kw), "float32")
        y0, z0 = y * sh - ph, z * sw - pw
        rows = t.min(y0 + kh, h) - t.max(y0, 0)
        cols = t.min(z0 + kw, w) - t.max(z0, 0)
        return (rows * cols).astype("float32")

    def result(i, cc, y, z, ci):
        value = full[i, cc, y, z, ci]
        if mode != "max":
            value = value / count(y, z)
        if c % BLOCK:
            value = te.if_then_else(cc * BLOCK + ci < c, value, zero)
        return value
    out = te.compute((n, cb, oh, ow, BLOCK), result, name="out")

    def schedule(sch):
        b = sch.get_sblock("pool")
        i, cc, y, z, ci, r0, r1 = sch.get_loops(b)
        sch.reorder(i, cc, y, z, r0, r1, ci)
        par = sch.fuse(i, cc, y)
        parallel_if(sch, par, n * cb * oh * ow * BLOCK * kh * kw)
        sch.set_scope(b, 0, "global")     # on the stack, not the heap: see depthwise.py
        o = sch.get_sblock("out")
        sch.reverse_compute_at(o, z)
        sch.vectorize(ci)
        init = sch.decompose_reduction(b, r0)
        # below z, not par: z is the update's loop too, and unrolling it unrolled the
        # whole output row (56 pixels in ResNet-18): 7x the build time for no run-time
        # gain (first-call time, issue 11)
        vectorize_inner(sch, init, z)
        vectorize_inner(sch, o, z)

    return scheduled_func([x, out], schedule, "pool_nchw16c")


def spatial_reduce_nchwc(shape: tuple[int, int, int, int], mode: str, keepdims: bool):
    """Scheduled PrimFunc (x blocked, out plain) reducing H and W: (N, C) or (N, C, 1, 1).
    Global average pooling before a classifier is the common case."""
    te, t = tvm().te, tvm().tirx
    if mode not in REDUCE_MODES:
        raise ValueError(f"spatial_reduce_nchwc: mode {mode!r} is not one of {REDUCE_MODES}")
    n, c, h, w = shape
    cb = -(-c // BLOCK)
    x = te.placeholder((n, cb, h, w, BLOCK), "float32", name="x")
    rh, rw = te.reduce_axis((0, h), "rh"), te.reduce_axis((0, w), "rw")
    reducer = {"sum": te.sum, "mean": te.sum, "max": te.max, "min": te.min}[mode]
    red = te.compute((n, cb, BLOCK), lambda i, cc, ci: reducer(x[i, cc, rh, rw, ci],
                                                               axis=[rh, rw]), name="reduce")

    def value(i, ch):
        v = red[i, ch // BLOCK, ch % BLOCK]
        return v / t.const(float(h * w), "float32") if mode == "mean" else v
    if keepdims:
        out = te.compute((n, c, 1, 1), lambda i, ch, a, b: value(i, ch), name="out")
    else:
        out = te.compute((n, c), value, name="out")

    def schedule(sch):
        b = sch.get_sblock("reduce")
        i, cc, ci, r0, r1 = sch.get_loops(b)
        sch.reorder(i, cc, r0, r1, ci)
        outer = sch.fuse(i, cc)
        if n * cb > 1:
            parallel_if(sch, outer, n * cb * h * w * BLOCK)
        sch.vectorize(ci)
        init = sch.decompose_reduction(b, r0)
        vectorize_inner(sch, init, outer)

    return scheduled_func([x, out], schedule, "spatial_reduce_nchw16c")
