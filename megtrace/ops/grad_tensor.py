"""Gradient rules (`OpDef.vjp`) of reductions, shape ops, matrix products and the
activations with parameters (see OpDef for the contract). Each rule undoes its op's
data movement with the inverse movement (reshape back, sum a broadcast, scatter a slice)
as MegEngine's grad rules do."""
from __future__ import annotations

import math

import numpy as np


def _norm_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted({a % ndim if ndim else 0 for a in axes}))


def _restore(V, t, x, axes):
    """`t` (reduced over `axes` of x, with or without kept axes) broadcast back to x."""
    keep = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    if tuple(t.shape) != keep:
        t = V.apply("reshape", t, shape=keep)
    return V.apply("broadcast_to", t, shape=tuple(x.shape)) if keep != tuple(x.shape) else t


def reduce_vjp(V, inputs, outputs, grads, *, mode, axis, keepdims, data_type="DEFAULT"):
    (x,), (y,), (g,) = inputs, outputs, grads
    axes = _norm_axes(axis, x.ndim)
    gx = _restore(V, g, x, axes)
    if mode == "sum":
        return (gx,)
    if mode == "mean":
        count = math.prod([int(x.shape[a]) for a in axes])
        return (gx / V.const(max(count, 1), gx),)
    yx = _restore(V, y, x, axes)
    if mode in ("max", "min"):      # MegEngine: every element equal to the result
        return (V.select(V.apply("eq", x, yx), gx),)
    if mode == "prod":
        return (gx * yx / x,)
    raise ValueError(f"reduce: no gradient for mode {mode!r}")


def reshape_vjp(V, inputs, outputs, grads, **_):
    x, g = inputs[0], grads[0]
    return (V.apply("reshape", g, shape=tuple(x.shape)),) + (None,) * (len(inputs) - 1)


def broadcast_to_vjp(V, inputs, outputs, grads, **_):
    x, g = inputs[0], grads[0]
    return (V.sum_to(g, tuple(x.shape)),) + (None,) * (len(inputs) - 1)


def transpose_vjp(V, inputs, outputs, grads, *, pattern):
    inverse = tuple(int(i) for i in np.argsort(pattern))
    return (V.apply("transpose", grads[0], pattern=inverse),)


def concat_vjp(V, inputs, outputs, grads, *, axis):
    g = grads[0]
    ax = axis % g.ndim
    out, start = [], 0
    for x in inputs:
        stop = start + x.shape[ax]
        out.append(V.apply("subtensor", g, index=((ax, start, stop, None, None),)))
        start = stop
    return tuple(out)


def subtensor_vjp(V, inputs, outputs, grads, *, index):
    x, g = inputs[0], grads[0]
    return (V.apply("set_subtensor", V.zeros_like(x), g, index=index),) + \
        (None,) * (len(inputs) - 1)


def set_subtensor_vjp(V, inputs, outputs, grads, *, index):
    (x, v), g = inputs[:2], grads[0]
    gx = V.apply("set_subtensor", g, V.zeros_like(v), index=index)
    return (gx, V.apply("subtensor", g, index=index)) + (None,) * (len(inputs) - 2)


def identity_vjp(V, inputs, outputs, grads, **_):
    return (grads[0],)


def astype_vjp(V, inputs, outputs, grads, **_):
    (x,), (g,) = inputs, grads
    if x.dtype.kind != "f":
        return (None,)
    return (V.cast(g, x),)


def matmul_vjp(V, inputs, outputs, grads, *, transpose_a, transpose_b, compute_mode="DEFAULT"):
    (a, b), (g,) = inputs, grads
    mm = lambda p, q, ta, tb: V.apply("matmul", p, q, transpose_a=ta, transpose_b=tb)  # noqa
    ga = gb = None
    if V.needs_grad(0):
        ga = mm(g, b, False, not transpose_b) if not transpose_a else \
            mm(b, g, transpose_b, True)
        ga = V.sum_to(ga, tuple(a.shape))
    if V.needs_grad(1):
        gb = mm(a, g, not transpose_a, False) if not transpose_b else \
            mm(g, a, True, transpose_a)
        gb = V.sum_to(gb, tuple(b.shape))
    return ga, gb


def dot_vjp(V, inputs, outputs, grads):
    (a, b), (g,) = inputs, grads
    return g * b, g * a


def softmax_vjp(V, inputs, outputs, grads, *, axis):
    (y,), (g,) = outputs, grads
    gy = g * y
    total = V.apply("reduce", gy, mode="sum", axis=axis % y.ndim, keepdims=True)
    return (gy - y * total,)


def leaky_relu_vjp(V, inputs, outputs, grads, *, negative_slope):
    """x >= 0 takes g unscaled (MegEngine 1.13: the gradient at 0 is 1, not the slope)."""
    (x,), (g,) = inputs, grads
    positive = V.apply("ge", x, V.const(0, x))
    return (V.select(positive, g, g * V.const(negative_slope, g)),)


def clip_vjp(V, inputs, outputs, grads, *, lower, upper):
    """clip is max(x, lower) then min(., upper): x keeps the gradient where
    lower <= x <= upper (MegEngine's tie rule for max/min)."""
    (x,), (g,) = inputs, grads
    keep = None
    if lower is not None:
        keep = V.apply("le", V.const(lower, x), x)
    if upper is not None:
        below = V.apply("le", x, V.const(upper, x))
        keep = below if keep is None else V.apply("logical_and", keep, below)
    return (g if keep is None else V.select(keep, g),)


def indexing_one_hot_vjp(V, inputs, outputs, grads, *, axis):
    """The picked gradient goes back to the picked position (cross-entropy's path)."""
    (src, index), (g,) = inputs, grads
    n = src.shape[axis]
    positions = np.arange(n, dtype=np.int32).reshape(
        tuple(n if i == axis else 1 for i in range(src.ndim)))
    picked = V.apply("eq", V.apply("expand_dims", index, axis=(axis,)),
                     V.const(positions, index))
    return V.select(picked, g), None
