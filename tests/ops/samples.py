"""Per-op samples with references written independently of megtrace (loops, float64)."""
from __future__ import annotations

import math
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


def _ln_param(n):
    return lambda rng: rng.uniform(0.5, 1.5, size=(n,)).astype(np.float32)


def _ln_ref(x, w, b, nd):
    axes = tuple(range(x.ndim - nd, x.ndim))
    x = x.astype(np.float64)
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * w + b


def _pad_ref(x, widths, value):
    out = np.full(tuple(d + a + b for d, (a, b) in zip(x.shape, widths)), value)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, widths))] = x
    return out


def _stat(c):
    return lambda rng: rng.uniform(0.5, 1.5, size=(1, c, 1, 1)).astype(np.float32)


def _unary(name, ref, lo=-2.0, hi=2.0):
    return Sample(name, lambda rng: [f32(3, 5, lo=lo, hi=hi)(rng)], ref=ref)


def _binary(name, ref, lo=-2.0, hi=2.0, tag="broadcast"):
    return Sample(name, lambda rng: [f32(2, 3, 4, lo=lo, hi=hi)(rng), f32(3, 1, lo=lo, hi=hi)(rng)],
                  ref=ref, tag=tag)


def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


def _sigm(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def _ints(*shape, lo=-5, hi=5):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(np.int32)


def _bools(*shape):
    return lambda rng: rng.uniform(size=shape) > 0.5


def _adaptive_ref(x, mode, out):
    """MegEngine's AdaptivePooling: stride in // out, window in - (out - 1) * stride
    (real MegEngine 1.13's values: tests/test_tensor_semantics.py)."""
    n, c, h, w = x.shape
    res = np.zeros((n, c) + tuple(out))
    sh, sw = h // out[0], w // out[1]
    kh, kw = h - (out[0] - 1) * sh, w - (out[1] - 1) * sw
    for i in range(out[0]):
        for j in range(out[1]):
            h0, h1 = i * sh, i * sh + kh
            w0, w1 = j * sw, j * sw + kw
            win = x[:, :, h0:h1, w0:w1].astype(np.float64)
            res[:, :, i, j] = win.max(axis=(2, 3)) if mode == "max" else win.mean(axis=(2, 3))
    return res


def _topk_ref(x, k, descending):
    rows = [sorted(range(x.shape[1]), key=lambda j: (-x[r, j] if descending else x[r, j]))[:k]
            for r in range(x.shape[0])]
    idx = np.array(rows, np.int32)
    return np.take_along_axis(x, idx, axis=1), idx


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
    _unary("sqrt", lambda x: np.sqrt(x.astype(np.float64)), lo=0.0, hi=4.0),
    _unary("square", lambda x: x.astype(np.float64) * x),
    _unary("round", lambda x: np.where(x >= 0, np.floor(x + 0.5), -np.floor(-x + 0.5)), lo=-2.4,
           hi=2.4),
    _unary("log1p", lambda x: np.log(1 + x.astype(np.float64)), lo=-0.5, hi=2.0),
    _unary("expm1", lambda x: np.exp(x.astype(np.float64)) - 1),
    _unary("erf", _erf),
    _unary("relu6", lambda x: np.minimum(np.maximum(x, 0), 6), lo=-3, hi=9),
    _unary("silu", lambda x: x * _sigm(x)),
    _unary("gelu", lambda x: x * 0.5 * (1 + _erf(x / math.sqrt(2)))),
    _unary("hswish", lambda x: x * np.clip(x + 3.0, 0, 6) / 6, lo=-5, hi=5),
    _unary("hsigmoid", lambda x: np.clip(x + 3.0, 0, 6) / 6, lo=-5, hi=5),
    _unary("softplus", lambda x: np.log(1 + np.exp(x.astype(np.float64)))),
    _unary("logsigmoid", lambda x: np.log(_sigm(x))),
    _unary("fast_tanh", lambda x: x.astype(np.float64) * (27 + x.astype(np.float64) ** 2)
           / (27 + 9 * x.astype(np.float64) ** 2), lo=-4, hi=4),
    _binary("floor_div", lambda a, b: np.floor(a.astype(np.float64) / b), lo=0.5, hi=4.0),
    _binary("mod", lambda a, b: np.fmod(a.astype(np.float64), b), lo=0.5, hi=4.0),
    Sample("lt", lambda rng: [_ints(3, 4)(rng), _ints(4)(rng)], ref=lambda a, b: a < b),
    Sample("le", lambda rng: [_ints(3, 4)(rng), _ints(4)(rng)], ref=lambda a, b: a <= b),
    Sample("gt", lambda rng: [f32(3, 4)(rng), f32(3, 1)(rng)], ref=lambda a, b: a > b),
    Sample("ge", lambda rng: [_ints(3, 4)(rng), _ints(3, 4)(rng)], ref=lambda a, b: a >= b),
    Sample("eq", lambda rng: [_ints(3, 4)(rng), _ints(3, 4)(rng)], ref=lambda a, b: a == b),
    Sample("logical_and", lambda rng: [_bools(3, 4)(rng), _bools(4)(rng)],
           ref=lambda a, b: a & b),
    Sample("logical_or", lambda rng: [_bools(3, 4)(rng), _bools(4)(rng)],
           ref=lambda a, b: a | b),
    Sample("logical_xor", lambda rng: [_bools(3, 4)(rng), _bools(4)(rng)],
           ref=lambda a, b: a ^ b),
    Sample("logical_not", lambda rng: [_bools(3, 4)(rng)], ref=lambda a: ~a),
    Sample("softmax", lambda rng: [f32(2, 3, 5, lo=-4, hi=4)(rng)], {"axis": 1},
           ref=lambda x, axis: np.exp(x.astype(np.float64)) / np.exp(x.astype(np.float64)).sum(
               axis=1, keepdims=True)),
    Sample("leaky_relu", lambda rng: [f32(3, 4)(rng)], {"negative_slope": 0.2},
           ref=lambda x, negative_slope: np.where(x > 0, x, 0.2 * x.astype(np.float64))),
    Sample("clip", lambda rng: [f32(3, 4, lo=-3, hi=3)(rng)], {"lower": -1.0, "upper": 0.5},
           ref=lambda x, **p: np.minimum(np.maximum(x, -1.0), 0.5)),
    Sample("layer_norm", lambda rng: [f32(2, 5, 6)(rng), _ln_param(6)(rng), _ln_param(6)(rng)],
           {"eps": 1e-5, "normalized_dim": 1}, ref=lambda x, w, b, **p: _ln_ref(x, w, b, 1)),
    Sample("layer_norm", lambda rng: [f32(2, 5, 6)(rng), f32(5, 6)(rng), f32(5, 6)(rng)],
           {"eps": 1e-5, "normalized_dim": 2}, ref=lambda x, w, b, **p: _ln_ref(x, w, b, 2),
           tag="2-axes"),
    Sample("adaptive_pool2d", lambda rng: [f32(2, 3, 7, 9)(rng)], {"mode": "average", "out": (3, 4)},
           ref=lambda x, **p: _adaptive_ref(x, **p), tag="avg"),
    Sample("adaptive_pool2d", lambda rng: [f32(2, 3, 5, 9)(rng)], {"mode": "average", "out": (3, 2)},
           ref=lambda x, **p: _adaptive_ref(x, **p), tag="avg-overlapping"),
    Sample("adaptive_pool2d", lambda rng: [f32(1, 2, 5, 9)(rng)], {"mode": "max", "out": (3, 5)},
           ref=lambda x, **p: _adaptive_ref(x, **p), tag="max-overlapping"),
    Sample("adaptive_pool2d", lambda rng: [f32(1, 2, 6, 6)(rng)], {"mode": "max", "out": (1, 1)},
           ref=lambda x, **p: _adaptive_ref(x, **p), tag="max-global"),
    Sample("pad", lambda rng: [f32(2, 3, 4)(rng)],
           {"pad_width": ((0, 0), (1, 2), (2, 0)), "mode": "constant", "value": 0.5},
           ref=lambda x, **p: _pad_ref(x, ((0, 0), (1, 2), (2, 0)), 0.5), tag="constant"),
    Sample("pad", lambda rng: [f32(1, 4, 5)(rng)],
           {"pad_width": ((0, 0), (1, 1), (2, 2)), "mode": "replicate", "value": 0.0},
           ref=lambda x, **p: x[:, [0, 0, 1, 2, 3, 3]][:, :, [0, 0, 0, 1, 2, 3, 4, 4, 4]],
           tag="replicate"),
    Sample("transpose", lambda rng: [f32(2, 3, 4)(rng)], {"pattern": (2, 0, 1)},
           ref=lambda x, pattern: np.einsum("abc->cab", x)),
    Sample("take", lambda rng: [f32(5, 3)(rng), _ints(4, lo=0, hi=5)(rng)], {"axis": 0},
           ref=lambda x, i, axis: np.stack([x[k] for k in i])),
    Sample("where", lambda rng: [_bools(3, 4)(rng), f32(3, 4)(rng), f32(4)(rng)],
           ref=lambda m, x, y: m * x + (~m) * y),
    Sample("topk", lambda rng: [rng.permutation(24).reshape(3, 8).astype(np.float32)],
           {"k": 3, "descending": False}, ref=lambda x, **p: _topk_ref(x, 3, False),
           tag="ascending"),
    Sample("topk", lambda rng: [rng.permutation(24).reshape(3, 8).astype(np.float32)],
           {"k": 2, "descending": True}, ref=lambda x, **p: _topk_ref(x, 2, True),
           tag="descending"),
    Sample("cumsum", lambda rng: [f32(3, 4)(rng)], {"axis": 1},
           ref=lambda x, axis: np.stack([x[:, :j + 1].astype(np.float64).sum(1)
                                         for j in range(4)], 1)),
    Sample("arg_reduce", lambda rng: [rng.permutation(12).reshape(3, 4).astype(np.float32)],
           {"mode": "max", "axis": 1, "keepdims": False},
           ref=lambda x, **p: np.array([list(r).index(max(r)) for r in x], np.int32), tag="max"),
    Sample("arg_reduce", lambda rng: [rng.permutation(12).reshape(3, 4).astype(np.float32)],
           {"mode": "min", "axis": 0, "keepdims": True},
           ref=lambda x, **p: np.array([[list(c).index(min(c)) for c in x.T]], np.int32),
           tag="min-keepdims"),
    Sample("fuse_add_relu", lambda rng: [f32(3, 4)(rng), f32(4)(rng)],
           ref=lambda a, b: np.maximum(a.astype(np.float64) + b, 0)),
    Sample("fuse_add_sigmoid", lambda rng: [f32(3, 4)(rng), f32(4)(rng)],
           ref=lambda a, b: _sigm(a.astype(np.float64) + b)),
    Sample("fuse_add_tanh", lambda rng: [f32(3, 4)(rng), f32(4)(rng)],
           ref=lambda a, b: np.tanh(a.astype(np.float64) + b)),
    Sample("fuse_mul_add3", lambda rng: [f32(3, 4)(rng), f32(4)(rng), f32(3, 1)(rng)],
           ref=lambda a, b, c: a.astype(np.float64) * b + c),
    Sample("fuse_add_h_swish", lambda rng: [f32(3, 4, lo=-5, hi=5)(rng), f32(4)(rng)],
           ref=lambda a, b: (a.astype(np.float64) + b) * np.clip(a.astype(np.float64) + b + 3,
                                                                 0, 6) / 6),
    Sample("cond_leq_mov", lambda rng: [f32(3, 4)(rng), f32(4)(rng), f32(3, 1)(rng)],
           ref=lambda a, b, c: np.where(a <= b, c, 0)),
    Sample("conv_bias", lambda rng: [f32(1, 3, 7, 7)(rng), f32(4, 3, 3, 3)(rng),
                                     f32(1, 4, 1, 1)(rng)],
           {"stride": (2, 2), "padding": (1, 1), "dilation": (1, 1), "nonline": "RELU"},
           ref=lambda x, w, b, nonline, **p: np.maximum(_conv_ref(x, w, **p) + b, 0)),
    Sample("assert_equal", lambda rng: [f32(2, 3)(rng), f32(2, 3)(rng), f32(1)(rng)],
           {"maxerr": 1e-4, "verbose": False}, ref=lambda e, g, err, **p: g),
    Sample("broadcast_to", lambda rng: [f32(3, 1)(rng)], {"shape": (2, 3, 4)},
           ref=lambda x, shape: x[None] * np.ones((2, 3, 4))),
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
    ("transpose", [(2, 3)], {"pattern": (0, 0)}, "ShapeError", "permutation"),
    ("topk", [(2, 3)], {"k": 4}, "ShapeError", "out of range"),
    ("layer_norm", [(2, 3), (4,), (4,)], {}, "ShapeError", "weight"),
    ("pad", [(2, 3)], {"pad_width": ((1, 1),)}, "ShapeError", "pair per axis"),
    ("broadcast_to", [(2, 3)], {"shape": (4, 3)}, "ShapeError", "cannot broadcast"),
    ("batch_norm", [(1, 3, 4, 4), (1, 2, 1, 1), (1, 3, 1, 1), (1, 3, 1, 1), (1, 3, 1, 1)], {},
     "ShapeError", "weight"),
]


def _collect_area_samples() -> None:
    """Each area's ops keep their samples in `samples_<area>.py` beside this file (so
    people adding ops in parallel touch different files); all of them feed the same
    registry-wide tests."""
    import importlib
    import pkgutil
    from pathlib import Path
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.name.startswith("samples_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            SAMPLES.extend(getattr(module, "SAMPLES", []))
            BAD.extend(getattr(module, "BAD", []))


_collect_area_samples()
