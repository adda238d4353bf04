"""Softmax and LayerNorm over the last axis with vector-wide partial reductions.

Legalized as TVM writes them, each row's sum / max is one serial scalar chain (a 768-long
add chain per LayerNorm row: latency-bound, ~0.2 ms per encoder LayerNorm). Here a row of
K = 16 q values is first reduced to 16 lane partials, partial[.., l] = sum_q x[.., 16 q + l]
(the generic rule vectorizes that block along l: contiguous loads, 16 independent
chains), then the 16 partials are reduced. Rows whose length is not a multiple of 16
keep the plain form.
"""
from __future__ import annotations

from .._tvm import tvm
from . import fast_math

LANES = 16


def lane_reducible(shape, axis: int) -> bool:
    """Whether `axis` is the last one and its length a known multiple of LANES."""
    k = shape[-1]
    return axis % len(shape) == len(shape) - 1 and isinstance(getattr(k, "value", k), int) \
        and int(getattr(k, "value", k)) % LANES == 0


def row_reduce(value, lead, k: int, how: str, name: str):
    """reduce(value(*lead_index, j) for j < k) per leading index, as lane partials then
    a 16-wide reduction; `how` is "sum" or "max"."""
    te = tvm().te
    red = te.sum if how == "sum" else te.max
    q = te.reduce_axis((0, k // LANES), name + "_q")
    part = te.compute((*lead, LANES), lambda *i: red(value(*i[:-1], q * LANES + i[-1]),
                                                      axis=q), name=name + "_lanes")
    lane = te.reduce_axis((0, LANES), name + "_l")
    return te.compute(tuple(lead), lambda *i: red(part(*i, lane), axis=lane), name=name)


def softmax_last(x):
    """softmax over the last axis (its length a multiple of 16), fast_math's exp."""
    te = tvm().te
    lead, k = list(x.shape[:-1]), int(x.shape[-1])
    peak = row_reduce(lambda *i: x(*i), lead, k, "max", "sm_max")
    e = te.compute(x.shape, lambda *i: fast_math.fast_exp(x(*i) - peak(*i[:-1])), name="sm_exp")
    total = row_reduce(lambda *i: e(*i), lead, k, "sum", "sm_sum")
    return te.compute(x.shape, lambda *i: e(*i) / total(*i[:-1]), name="sm_norm")


def layer_norm_last(x, gamma, beta, eps: float):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (two passes, as
    TVM's legalization: the variance of the centred values)."""
    te, t = tvm().te, tvm().tirx
    lead, k = list(x.shape[:-1]), int(x.shape[-1])
    inv_k = t.const(1.0 / k, "float32")
    total = row_reduce(lambda *i: x(*i), lead, k, "sum", "ln_sum")
    mean = te.compute(tuple(lead), lambda *i: total(*i) * inv_k, name="ln_mean")
    sq = row_reduce(lambda *i: (x(*i) - mean(*i[:-1])) * (x(*i) - mean(*i[:-1])),
                     lead, k, "sum", "ln_sq")
    scale = te.compute(tuple(lead), lambda *i: t.rsqrt(sq(*i) * inv_k
                                                       + t.const(eps, "float32")),
                       name="ln_scale")
    return te.compute(x.shape, lambda *i: (x(*i) - mean(*i[:-1])) * scale(*i[:-1])
                      * gamma(i[-1]) + beta(i[-1]), name="ln_out")
