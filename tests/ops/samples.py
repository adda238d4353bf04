"""Per-op samples with references written independently of megtrace (loops, float64)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class Sample:
    op: str
    make: Callable[[np.random.Generator], list[np.ndarray]]
    params: dict[str, Any] = field(default_factory=dict)
    ref: Callable[..., Any] | None = None
    tag: str = ""

    def __str__(self):
        return f"{self.op}-{self.tag}" if self.tag else self.op


def f32(*shape, lo=-1.0, hi=1.0):
    return lambda rng: rng.uniform(lo, hi, size=shape).astype(np.float32)


def _conv_ref(x, w, stride, padding, dilation):
    x, w = x.astype(np.float64), w.astype(np.float64)
    if w.ndim == 4:
        w = w[None]
    g, ocg, icg, kh, kw = w.shape
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + 2 * padding[0], wd + 2 * padding[1]))
    xp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd] = x
    oh = (xp.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, g * ocg, oh, ow))
    for gi in range(g):
        for o in range(ocg):
            for i in range(oh):
                for j in range(ow):
                    for a in range(kh):
                        for b in range(kw):
                            patch = xp[:, gi * icg:(gi + 1) * icg, i * stride[0] + a * dilation[0],
                                       j * stride[1] + b * dilation[1]]
                            out[:, gi * ocg + o, i, j] += patch @ w[gi, o, :, a, b]
    return out


def _pool_ref(x, mode, kernel, stride, padding):
    n, c, h, w = x.shape
    oh = (h + 2 * padding[0] - kernel[0]) // stride[0] + 1
    ow = (w + 2 * padding[1] - kernel[1]) // stride[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * stride[0] - padding[0], j * stride[1] - padding[1]
            rs = range(max(r0, 0), min(r0 + kernel[0], h))
            cs = range(max(c0, 0), min(c0 + kernel[1], w))
            win = x[:, :, rs.start:rs.stop, cs.start:cs.stop].astype(np.float64)
            if mode == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            elif mode == "average":
                out[:, :, i, j] = win.sum(axis=(2, 3)) / (kernel[0] * kernel[1])
            else:
                out[:, :, i, j] = win.mean(axis=(2, 3))
    return out


def _bn_ref(x, w, b, m, v, eps):
    x = x.astype(np.float64)
    return (x - m) / np.sqrt(v.astype(np.float64) + eps) * w + b


def _bn_train_ref(x, w, b, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b, mean, var


def _stat(c):
    return lambda rng: rng.uniform(0.5, 1.5, size=(1, c, 1, 1)).astype(np.float32)


def _unary(name, ref, lo=-2.0, hi=2.0):
    return Sample(name, lambda rng: [f32(3, 5, lo=lo, hi=hi)(rng)], ref=ref)


def _binary(name, ref, lo=-2.0, hi=2.0, tag="broadcast"):
    return Sample(name, lambda rng: [f32(2, 3, 4, lo=lo, hi=hi)(rng), f32(3, 1, lo=lo, hi=hi)(rng)],
                  ref=ref, tag=tag)


SAMPLES: list[Sample] = [
    _unary("relu", lambda x: np.where(x > 0, x, 0.0)),
    _unary("sigmoid", lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    _unary("tanh", lambda x: np.tanh(x.astype(np.float64))),
    _unary("exp", lambda x: np.exp(x.astype(np.float64))),
    _unary("log", lambda x: np.log(x.astype(np.float64)), lo=0.1, hi=3.0),
    _unary("neg", lambda x: -x),
    _unary("abs", lambda x: np.where(x < 0, -x, x)),
    _unary("floor", lambda x: np.floor(x)),
    _unary("ceil", lambda x: np.ceil(x)),
    _unary("sin", lambda x: np.sin(x.astype(np.float64))),
    _unary("cos", lambda x: np.cos(x.astype(np.float64))),
    _binary("add", lambda a, b: a.astype(np.float64) + b),
    _binary("sub", lambda a, b: a.astype(np.float64) - b),
    _binary("mul", lambda a, b: a.astype(np.float64) * b),
    _binary("div", lambda a, b: a.astype(np.float64) / b, lo=0.5, hi=2.0),
    _binary("maximum", lambda a, b: np.where(a > b, a, b + 0 * a)),
    _binary("minimum", lambda a, b: np.where(a < b, a, b + 0 * a)),
    _binary("pow", lambda a, b: a.astype(np.float64) ** b, lo=0.5, hi=2.0),
    Sample("matmul", lambda rng: [f32(4, 6)(rng), f32(6, 5)(rng)],
           ref=lambda a, b, **p: np.einsum("ik,kj->ij", a.astype(np.float64), b), tag="2d"),
    Sample("matmul", lambda rng: [f32(4, 6)(rng), f32(5, 6)(rng)],
           {"transpose_b": True}, ref=lambda a, b, **p: np.einsum("ik,jk->ij", a.astype(np.float64), b),
           tag="transpose_b"),
    Sample("matmul", lambda rng: [f32(3, 6, 4)(rng), f32(3, 6, 5)(rng)],
           {"transpose_a": True},
           ref=lambda a, b, **p: np.einsum("bki,bkj->bij", a.astype(np.float64), b), tag="batched"),
    Sample("conv2d", lambda rng: [f32(2, 3, 9, 8)(rng), f32(4, 3, 3, 3)(rng)],
           {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)},
           ref=lambda x, w, **p: _conv_ref(x, w, **p), tag="pad1"),
    Sample("conv2d", lambda rng: [f32(1, 4, 11, 10)(rng), f32(6, 4, 3, 2)(rng)],
           {"stride": (2, 1), "padding": (0, 1), "dilation": (2, 1)},
           ref=lambda x, w, **p: _conv_ref(x, w, **p), tag="stride-dilation"),
    Sample("conv2d", lambda rng: [f32(1, 4, 7, 7)(rng), f32(2, 3, 2, 3, 3)(rng)],
           {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)},
           ref=lambda x, w, **p: _conv_ref(x, w, **p), tag="groups"),
    Sample("conv2d", lambda rng: [f32(1, 4, 7, 7)(rng), f32(4, 1, 1, 3, 3)(rng)],
           {"stride": (2, 2), "padding": (1, 1), "dilation": (1, 1)},
           ref=lambda x, w, **p: _conv_ref(x, w, **p), tag="depthwise"),
    Sample("pool2d", lambda rng: [f32(2, 3, 8, 8)(rng)],
           {"mode": "max", "kernel": (2, 2), "stride": (2, 2), "padding": (0, 0)},
           ref=lambda x, **p: _pool_ref(x, **p), tag="max"),
    Sample("pool2d", lambda rng: [f32(1, 2, 7, 7)(rng)],
           {"mode": "max", "kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)},
           ref=lambda x, **p: _pool_ref(x, **p), tag="max-pad"),
    Sample("pool2d", lambda rng: [f32(1, 2, 7, 7)(rng)],
           {"mode": "average", "kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)},
           ref=lambda x, **p: _pool_ref(x, **p), tag="avg-include-pad"),
    Sample("pool2d", lambda rng: [f32(1, 2, 7, 7)(rng)],
           {"mode": "average_count_exclude_padding", "kernel": (3, 3), "stride": (2, 2),
            "padding": (1, 1)},
           ref=lambda x, **p: _pool_ref(x, **p), tag="avg-exclude-pad"),
    Sample("batch_norm", lambda rng: [f32(2, 3, 4, 4)(rng), _stat(3)(rng), _stat(3)(rng),
                                      _stat(3)(rng), _stat(3)(rng)],
           {"eps": 1e-5}, ref=lambda *a, eps: _bn_ref(*a, eps)),
    Sample("batch_norm_train", lambda rng: [f32(4, 3, 5, 5)(rng), _stat(3)(rng), _stat(3)(rng)],
           {"eps": 1e-5}, ref=lambda *a, eps: _bn_train_ref(*a, eps)),
    Sample("reshape", lambda rng: [f32(2, 3, 4)(rng)], {"shape": (4, -1)},
           ref=lambda x, shape: x.reshape(4, 6)),
    Sample("flatten", lambda rng: [f32(2, 3, 4, 5)(rng)], {"start_axis": 1, "end_axis": 2},
           ref=lambda x, **p: x.reshape(2, 12, 5)),
    Sample("get_shape", lambda rng: [f32(2, 3, 4)(rng)],
           ref=lambda x: np.array([2, 3, 4], np.int32)),
    Sample("subtensor", lambda rng: [f32(5, 6)(rng)],
           {"index": ((0, 1, 4, None, None), (1, None, None, None, 2))},
           ref=lambda x, index: x[1:4, 2]),
    Sample("concat", lambda rng: [f32(2, 3)(rng), f32(2, 4)(rng)], {"axis": 1},
           ref=lambda a, b, axis: np.concatenate([a, b], axis=1)),
    Sample("reduce", lambda rng: [f32(2, 3, 4)(rng)], {"mode": "sum", "axis": 1},
           ref=lambda x, **p: x.astype(np.float64).sum(axis=1), tag="sum"),
    Sample("reduce", lambda rng: [f32(2, 3, 4, 5)(rng)],
           {"mode": "mean", "axis": (2, 3), "keepdims": True},
           ref=lambda x, **p: x.astype(np.float64).mean(axis=(2, 3), keepdims=True), tag="mean-hw"),
    Sample("reduce", lambda rng: [f32(3, 4)(rng)], {"mode": "max", "axis": None},
           ref=lambda x, **p: np.array(max(x.ravel())), tag="max-all"),
    Sample("reduce", lambda rng: [f32(3, 4)(rng)], {"mode": "min", "axis": -1},
           ref=lambda x, **p: np.array([min(r) for r in x]), tag="min"),
    Sample("reduce", lambda rng: [f32(3, 4, lo=0.5, hi=1.5)(rng)], {"mode": "prod", "axis": 0},
           ref=lambda x, **p: np.prod(x.astype(np.float64), axis=0), tag="prod"),
    Sample("expand_dims", lambda rng: [f32(3, 4)(rng)], {"axis": (0, 3)},
           ref=lambda x, axis: x[None, :, :, None]),
    Sample("squeeze", lambda rng: [f32(1, 3, 1, 4)(rng)], {"axis": (0, 2)},
           ref=lambda x, axis: x[0, :, 0, :]),
    Sample("astype", lambda rng: [f32(3, 4, lo=-5, hi=5)(rng)], {"dtype": "int32"},
           ref=lambda x, dtype: np.trunc(x).astype(np.int32)),
]

# (op, inputs, params, error class, words the message must contain)
BAD = [
    ("add", [(2, 3), (4, 3)], {}, "ShapeError", "cannot broadcast"),
    ("matmul", [(2, 3), (4, 5)], {}, "ShapeError", "inner dimensions"),
    ("conv2d", [(1, 3, 8, 8), (4, 2, 3, 3)], {}, "ShapeError", "channels"),
    ("conv2d", [(1, 3, 2, 2), (4, 3, 5, 5)], {}, "ShapeError", "does not fit"),
    ("pool2d", [(1, 3, 8)], {}, "ShapeError", "4-d"),
    ("reshape", [(2, 3)], {"shape": (4, -1)}, "ShapeError", "cannot reshape"),
    ("concat", [(2, 3), (3, 4)], {"axis": 0}, "ShapeError", "does not match"),
    ("reduce", [(2, 3)], {"axis": 2}, "ShapeError", "out of range"),
    ("squeeze", [(2, 3)], {"axis": (0,)}, "ShapeError", "not 1"),
    ("batch_norm", [(1, 3, 4, 4), (1, 2, 1, 1), (1, 3, 1, 1), (1, 3, 1, 1), (1, 3, 1, 1)], {},
     "ShapeError", "weight"),
]
