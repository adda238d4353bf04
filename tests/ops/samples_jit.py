"""Samples for megtrace.random's ops. The references recompute the documented generator
(lowbias32 hash of (key, index); uniform = top 24 bits / 2^24; Box-Muller for normal)
element by element with Python integers, and NumPy's Philox for the eager-only ops."""
from __future__ import annotations

import math

import numpy as np

from .samples import Sample

_M = 0xFFFFFFFF


def _mix(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M
    return x ^ (x >> 16)


def _bits(key, i: int) -> int:
    k0, k1 = (int(v) & _M for v in key)
    base = _mix(k0 ^ _mix(k1 ^ 0x9E3779B9))
    return _mix(((i * 0x9E3779B9) & _M) ^ base)


def _uniform_ref(key, shape, seed=0):
    n = int(np.prod(shape))
    return np.array([(_bits(key, i) >> 8) / 2.0 ** 24 for i in range(n)]).reshape(shape)


def _normal_ref(key, shape, mean=0.0, std=1.0, seed=0):
    out = []
    for j in range(int(np.prod(shape))):
        u1 = ((_bits(key, 2 * j) >> 8) + 1) / 2.0 ** 24
        u2 = (_bits(key, 2 * j + 1) >> 8) / 2.0 ** 24
        out.append(mean + std * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2))
    return np.array(out).reshape(shape)


def _key(seed, counter):
    return lambda rng: [np.array([seed, counter], np.uint32).view(np.int32)]


def _philox(key):
    k = np.asarray(key, np.int32).view(np.uint32).astype(np.uint64)
    return np.random.Generator(np.random.Philox(key=k))


def _with_key(*arrays):
    return lambda rng: [np.array([7, 3], np.int32)] + [a(rng) for a in arrays]


def _pos(*shape):
    return lambda rng: rng.uniform(0.5, 3.0, size=shape).astype(np.float32)


SAMPLES = [
    Sample("rng_uniform", _key(1, 0), {"shape": (3, 5)}, _uniform_ref),
    Sample("rng_uniform", _key(0xFFFFFFFF, 12345), {"shape": (7,)}, _uniform_ref, tag="big"),
    Sample("rng_normal", _key(42, 9), {"shape": (4, 3), "mean": 1.5, "std": 2.0}, _normal_ref),
    Sample("rng_gamma", _with_key(_pos(2, 3), _pos(2, 3)),
           ref=lambda key, k, t, seed=0: _philox(key).gamma(k, t)),
    Sample("rng_beta", _with_key(_pos(4), _pos(4)),
           ref=lambda key, a, b, seed=0: _philox(key).beta(a, b)),
    Sample("rng_poisson", _with_key(_pos(5)),
           ref=lambda key, lam, seed=0: _philox(key).poisson(lam)),
]

BAD = [
    ("rng_uniform", [(2,)], {"shape": (3,)}, "DTypeError", "int32[2]"),
    ("rng_normal", [(3,)], {"shape": (3,)}, "DTypeError", "int32[2]"),
]


# rng_permutation / rng_shuffle (ops/random_perm.py): the order sorts (hash, position)
def _order_ref(key, n):
    return sorted(range(n), key=lambda i: (_bits(key, i), i))


def _perm_ref(key, n, dtype="int32", seed=0):
    return np.array(_order_ref(key, n)).astype(dtype)


def _shuffle_ref(key, x, seed=0):
    order = _order_ref(key, x.shape[0])
    return np.stack([x[i] for i in order]), np.array(order, np.int32)


SAMPLES += [
    Sample("rng_permutation", _key(9, 2), {"n": 11}, _perm_ref),
    Sample("rng_permutation", _key(0xFFFFFFFF, 7), {"n": 5, "dtype": "float32"}, _perm_ref,
           tag="float32"),
    Sample("rng_shuffle", lambda rng: [np.array([4, 1], np.int32),
                                       rng.uniform(-1, 1, (6, 3)).astype(np.float32)],
           {}, _shuffle_ref),
]
BAD += [("rng_shuffle", [(2,), ()], {}, "DTypeError", "int32[2]")]


def _dropout_ref(key, x, drop_prob=0.5, seed=0):
    keep = np.array([(_bits(key, i) >> 8) / 2.0 ** 24 >= drop_prob for i in range(x.size)])
    return np.where(keep.reshape(x.shape), x / (1 - drop_prob), 0.0)


SAMPLES += [Sample("rng_dropout", lambda rng: [np.array([3, 8], np.int32),
                                              rng.uniform(-1, 1, (4, 5)).astype(np.float32)],
                   {"drop_prob": 0.3}, _dropout_ref)]
