"""Gradient rules (`OpDef.vjp`) of the normalizations: batch_norm in training mode and
layer_norm. The normalized value is recomputed from the saved input with Tensor ops
(float32, as MegEngine's BN backward kernels do)."""
from __future__ import annotations


def _normalized(V, x, axes, eps):
    """(x - mean) * rstd over `axes`, and rstd (both keep the reduced axes)."""
    mean = V.apply("reduce", x, mode="mean", axis=axes, keepdims=True)
    centered = x - mean
    var = V.apply("reduce", centered * centered, mode="mean", axis=axes, keepdims=True)
    rstd = V.const(1, x) / V.apply("sqrt", var + V.const(eps, x))
    return centered * rstd, rstd, centered


def _mean(V, t, axes):
    return V.apply("reduce", t, mode="mean", axis=axes, keepdims=True)


def _sum(V, t, axes):
    return V.apply("reduce", t, mode="sum", axis=axes, keepdims=True)


def batch_norm_train_vjp(V, inputs, outputs, grads, *, eps):
    """y = xhat * w + b with batch statistics over N, H, W; the saved mean and variance
    outputs are differentiable too (their gradients flow back into x)."""
    (x, w, b), (gy, gmean, gvar) = inputs, grads
    axes = (0, 2, 3)
    xhat, rstd, centered = _normalized(V, x, axes, eps)
    gx = gw = gb = None
    if gy is not None:
        gb = _sum(V, gy, axes)
        gw = _sum(V, gy * xhat, axes)
        d = gy * w
        gx = rstd * (d - _mean(V, d, axes) - xhat * _mean(V, d * xhat, axes))
    count = x.size // x.shape[1]
    if gmean is not None:
        extra = V.apply("broadcast_to", gmean * V.const(1 / count, x), shape=tuple(x.shape))
        gx = extra if gx is None else gx + extra
    if gvar is not None:
        extra = gvar * centered * V.const(2 / count, x)
        gx = extra if gx is None else gx + extra
    return gx, gw, gb


def _affine_norm_vjp(V, x, w, g, axes, eps):
    """Gradients of ((x - mean) * rstd) * w + b normalized over `axes`, `w` already shaped
    to broadcast against x; weight and bias gradients sum over the other axes."""
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    xhat, rstd, _ = _normalized(V, x, axes, eps)
    d = g * w
    gx = rstd * (d - _mean(V, d, axes) - xhat * _mean(V, d * xhat, axes))
    if rest:
        gw = V.apply("reduce", g * xhat, mode="sum", axis=rest, keepdims=False)
        gb = V.apply("reduce", g, mode="sum", axis=rest, keepdims=False)
    else:
        gw, gb = g * xhat, g
    return gx, gw, gb


def layer_norm_vjp(V, inputs, outputs, grads, *, eps, normalized_dim):
    (x, w, b), (g,) = inputs, grads
    return _affine_norm_vjp(V, x, w, g, tuple(range(x.ndim - normalized_dim, x.ndim)), eps)


def general_norm_vjp(V, inputs, outputs, grads, *, eps, axis_start, axis_end):
    """layer_norm's rule over axes [axis_start, axis_end) anywhere in the input."""
    (x, w, b), (g,) = inputs, grads
    view = (1,) * axis_start + tuple(w.shape) + (1,) * (x.ndim - axis_end)
    return _affine_norm_vjp(V, x, V.apply("reshape", w, shape=view), g,
                            tuple(range(axis_start, axis_end)), eps)


def _channel_window_sum(V, t, n):
    """sum over channels c - n//2 .. c + n//2 (clipped) of an NCHW tensor."""
    half, c = n // 2, t.shape[1]
    tp = V.apply("pad", t, pad_width=((0, 0), (half, half), (0, 0), (0, 0)))
    total = None
    for i in range(2 * half + 1):
        part = V.apply("subtensor", tp, index=((1, i, i + c, None, None),))
        total = part if total is None else total + part
    return total


def lrn_vjp(V, inputs, outputs, grads, *, n, k, alpha, beta):
    """y = x * s^-beta with s = k + alpha * W(x^2) (W the symmetric channel window sum):
    dx = g * s^-beta + 2 alpha x W(-beta g x s^(-beta-1))."""
    (x,), (g,) = inputs, grads
    s = _channel_window_sum(V, x * x, n) * V.const(alpha, x) + V.const(k, x)
    inner = g * x * V.apply("pow", s, V.const(-beta - 1.0, x)) * V.const(-beta, x)
    return (g * V.apply("pow", s, V.const(-beta, x)) +
            x * _channel_window_sum(V, inner, n) * V.const(2.0 * alpha, x),)
