"""Spatial ops on NCHW images: adaptive pooling, padding."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from . import quantized_lower
from .registry import MgeComposite, MgeOpr, OpDef, register

ADAPTIVE_POOLING = MgeOpr("AdaptivePoolingV1", "AdaptivePooling")


# -- adaptive pooling ---------------------------------------------------------------------
def _window(size: int, out: int) -> tuple[int, int]:
    """(window, stride) of MegEngine's AdaptivePooling along one axis: stride size // out,
    the window what is left for the last output (5 -> 3: windows of 3 at stride 1, not
    PyTorch's bins of 2 or 3)."""
    stride = size // out
    return size - (out - 1) * stride, stride


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    window, stride = _window(size, out)
    return [(i * stride, i * stride + window) for i in range(out)]


def _pooled(L, x, mode: str, out) -> object:
    """Relax's pooling with MegEngine's windows and strides (None where an output side
    exceeds the input's: stride 0, each output then reads the whole input)."""
    h, w = L.types[0].shape[2:]
    (wh, sh), (ww, sw) = _window(h, out[0]), _window(w, out[1])
    if not sh or not sw:
        return None
    pool = L.R.nn.max_pool2d if mode == "max" else L.R.nn.avg_pool2d
    return pool(x, pool_size=(wh, ww), strides=(sh, sw))


def _adaptive_infer(x, *, mode, out):
    if x.ndim != 4:
        raise ShapeError(f"adaptive_pool2d: input must be 4-d NCHW; got {x}")
    if mode not in ("max", "average") or min(out) <= 0:
        raise ValueError(f"adaptive_pool2d: bad mode {mode!r} or output size {out}")
    return TensorType(x.shape[:2] + tuple(out), x.dtype)


def _adaptive_eager(x, *, mode, out):
    reduce = np.max if mode == "max" else np.mean
    y = np.empty(x.shape[:2] + tuple(out), np.float64)
    for i, (h0, h1) in enumerate(_bins(x.shape[2], out[0])):
        for j, (w0, w1) in enumerate(_bins(x.shape[3], out[1])):
            y[:, :, i, j] = reduce(x[:, :, h0:h1, w0:w1].astype(np.float64), axis=(2, 3))
    return y.astype(x.dtype)


def _adaptive_lower(L, x, *, mode, out):
    R = L.R
    n, c, h, w = L.types[0].shape
    if mode == "average" and L.types[0].quant is not None:     # rounded averages
        count = np.outer([b - a for a, b in _bins(h, out[0])], [b - a for a, b in _bins(w, out[1])])
        def average(xf):
            pooled = _pooled(L, xf, mode, out)
            return pooled if pooled is not None else _per_bin(L, xf, mode, out)
        return quantized_lower.lower_average(L, x, average, count)
    if mode == "max" and h % out[0] == 0 and w % out[1] == 0:   # a reshape and a max
        return R.max(R.reshape(x, (n, c, out[0], h // out[0], out[1], w // out[1])), axis=[3, 5])
    pooled = _pooled(L, x, mode, out)
    return pooled if pooled is not None else _per_bin(L, x, mode, out)


def _per_bin(L, x, mode: str, out):
    """Each output reduced from its own window, joined back together."""
    R = L.R
    h, w = L.types[0].shape[2:]
    reduce = R.max if mode == "max" else R.mean
    rows = []
    for h0, h1 in _bins(h, out[0]):
        cells = [reduce(R.strided_slice(x, axes=[2, 3], begin=[h0, w0], end=[h1, w1]),
                        axis=[2, 3], keepdims=True) for w0, w1 in _bins(w, out[1])]
        rows.append(R.concat(cells, axis=3))
    return R.concat(rows, axis=2)


def _adaptive_emit(em, types, p, inputs):
    mode = "MAX_" if p["mode"] == "max" else "AVERAGE"
    return em.opr(ADAPTIVE_POOLING, {"mode": mode},
                  [inputs[0], em.const(np.array(p["out"], np.int32))])


def _int_const(V, values, like):
    return V.apply("astype", V.const(values, like), dtype="int32")


def _bin_matrix(size: int, out: int) -> np.ndarray:
    """(out, size): row i averages bin i."""
    m = np.zeros((out, size))
    for i, (a, b) in enumerate(_bins(size, out)):
        m[i, a:b] = 1.0 / (b - a)
    return m


def _adaptive_vjp(V, inputs, outputs, grads, *, mode, out):
    (x,), (y,), (g,) = inputs, outputs, grads
    n, c, h, w = x.shape
    if mode == "average":       # y = Mh x Mw^T per image, so gx = Mh^T g Mw
        mh = V.const(_bin_matrix(h, out[0]).T.reshape(1, 1, h, out[0]), g)
        mw = V.const(_bin_matrix(w, out[1]).reshape(1, 1, out[1], w), g)
        return (V.apply("matmul", mh, V.apply("matmul", g, mw)),)
    if h % out[0] == 0 and w % out[1] == 0:     # bins tile the image: compare upsampled
        rows = _int_const(V, np.arange(h) // (h // out[0]), g)
        cols = _int_const(V, np.arange(w) // (w // out[1]), g)
        up = lambda t: V.apply("take", V.apply("take", t, rows, axis=2), cols, axis=3)  # noqa
        return (V.select(V.apply("eq", x, up(y)), up(g)),)
    total = None                # overlapping bins: each bin's share, padded back
    for i, (h0, h1) in enumerate(_bins(h, out[0])):
        for j, (w0, w1) in enumerate(_bins(w, out[1])):
            cell = ((2, i, i + 1, None, None), (3, j, j + 1, None, None))
            region = V.apply("subtensor", x, index=((2, h0, h1, None, None),
                                                    (3, w0, w1, None, None)))
            hit = V.apply("eq", region, V.apply("subtensor", y, index=cell))
            share = V.select(hit, V.apply("broadcast_to", V.apply("subtensor", g, index=cell),
                                          shape=tuple(region.shape)))
            share = V.apply("pad", share, pad_width=((0, 0), (0, 0), (h0, h - h1),
                                                     (w0, w - w1)))
            total = share if total is None else total + share
    return (total,)


register(OpDef("adaptive_pool2d", params={"mode": "average", "out": (1, 1)},
               eager=_adaptive_eager, infer=_adaptive_infer, lower=_adaptive_lower,
               mge=MgeComposite(_adaptive_emit), vjp=_adaptive_vjp))

# -- pad ----------------------------------------------------------------------------------
_PAD_MODES = {"constant": ("constant", "CONSTANT"), "reflect": ("reflect", "REFLECT"),
              "replicate": ("edge", "REPLICATE")}


def _pad_infer(x, *, pad_width, mode, value):
    if len(pad_width) != x.ndim or any(a < 0 or b < 0 for a, b in pad_width):
        raise ShapeError(f"pad: pad_width needs one non-negative (before, after) pair per axis "
                         f"of {x}; got {pad_width}")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {sorted(_PAD_MODES)}; got {mode!r}")
    if mode == "reflect" and any(max(p) >= d for p, d in zip(pad_width, x.shape)):
        raise ShapeError(f"pad: reflect padding {pad_width} must be smaller than {x}")
    return TensorType(tuple(d + a + b for d, (a, b) in zip(x.shape, pad_width)), x.dtype)


def _pad_eager(x, *, pad_width, mode, value):
    if mode == "constant":
        return np.pad(x, pad_width, constant_values=value)
    return np.pad(x, pad_width, mode=_PAD_MODES[mode][0])


def _pad_lower(L, x, *, pad_width, mode, value):
    if mode == "constant":
        flat = [v for pair in pad_width for v in pair]
        return L.R.nn.pad(x, flat, pad_mode="constant", pad_value=float(value))
    # Edge/reflect padding as a gather of source indices (TVM's legalized edge pad is wrong
    # in 0.27: it pads with zeros).
    for axis, (a, b) in enumerate(pad_width):
        if a or b:
            d = L.types[0].shape[axis]
            idx = np.arange(-a, d + b)
            idx = np.clip(idx, 0, d - 1) if mode == "replicate" else \
                np.abs(idx) - 2 * np.maximum(np.abs(idx) - (d - 1), 0)
            x = L.R.take(x, L.const(idx.astype(np.int32), "int32"), axis=axis)
    return x


def _pad_fields(p):
    fields = {"padding_val": p["value"], "padding_mode": _PAD_MODES[p["mode"]][1]}
    for i, (a, b) in enumerate(p["pad_width"]):
        fields[f"front_offset_dim{i}"], fields[f"back_offset_dim{i}"] = a, b
    return fields


def _pad_vjp(V, inputs, outputs, grads, *, pad_width, mode, value):
    """constant: the inner block of g; edge modes: every read of a source row adds up
    (the source-index gathers of the lowering, undone axis by axis)."""
    (x,), (g,) = inputs, grads
    if mode == "constant":
        index = tuple((axis, a, a + d, None, None)
                      for axis, ((a, b), d) in enumerate(zip(pad_width, x.shape)) if a or b)
        return (V.apply("subtensor", g, index=index) if index else g,)
    for axis, (a, b) in enumerate(pad_width):
        if a or b:
            d = x.shape[axis]
            idx = np.arange(-a, d + b)
            idx = np.clip(idx, 0, d - 1) if mode == "replicate" else \
                np.abs(idx) - 2 * np.maximum(np.abs(idx) - (d - 1), 0)
            shape = tuple(d if i == axis else s for i, s in enumerate(g.shape))
            zeros = V.apply("broadcast_to", V.const(0, g), shape=shape)
            g = V.apply("indexing_incr_multi_axis_vec", zeros, g, _int_const(V, idx, g),
                        axes=(axis,))
    return (g,)


register(OpDef("pad", params={"pad_width": (), "mode": "constant", "value": 0.0},
               eager=_pad_eager, infer=_pad_infer, lower=_pad_lower,
               mge=MgeOpr("Padding", "Padding", fields=_pad_fields), vjp=_pad_vjp))

