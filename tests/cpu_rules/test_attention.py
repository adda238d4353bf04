"""The fused attention rule (relay_bridge/cpu/attention.py): softmax(q @ k^T) @ v as one
kernel reading q, k, v through views of their bases, against float64 NumPy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace
from megtrace.relay_bridge import compile_graph

TOL = 1e-5


def _f32(rng, *shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _compiled(fn, *arrays):
    traced = trace(symbolic=True, capture_as_const=True)(fn)
    traced(*(mge.tensor(a) for a in arrays))
    return compile_graph(traced.graph)


def _self_attention(heads: int, d: int, scale_after: bool = True):
    """q, k, v sliced out of one (b, s, 3 * heads * d) projection, as EncoderBlock does."""
    def fn(x):
        b, s, _ = x.shape
        qkv = x.reshape(b, s, 3, heads, d).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = F.matmul(q, k, transpose_b=True)
        scores = scores / math.sqrt(d) if scale_after else scores * 0.5
        ctx = F.matmul(F.softmax(scores, axis=-1), v)
        return ctx.transpose(0, 2, 1, 3).reshape(b, s, heads * d)
    return fn


def _self_attention_ref(x, heads, d, scale):
    b, s, _ = x.shape
    qkv = x.astype(np.float64).reshape(b, s, 3, heads, d).transpose(2, 0, 3, 1, 4)
    p = _softmax(qkv[0] @ np.swapaxes(qkv[1], -1, -2) * scale)
    return (p @ qkv[2]).transpose(0, 2, 1, 3).reshape(b, s, heads * d)


@pytest.mark.parametrize("b,s,heads,d", [(1, 32, 2, 16), (2, 48, 3, 32), (1, 16, 1, 64)],
                         ids=["s32", "batch2-s48", "one-head"])
def test_self_attention_is_one_kernel_without_copies(b, s, heads, d, rng):
    x = _f32(rng, b, s, 3 * heads * d) * 3
    cg = _compiled(_self_attention(heads, d), x)
    assert cg.rules == ["attention"]
    got = cg(x)[0]
    assert np.isfinite(got).all()
    assert rel_err(got, _self_attention_ref(x, heads, d, 1 / math.sqrt(d))) <= TOL


def test_kernel_list_has_no_transpose_or_slice_of_the_projection(rng):
    x, w = _f32(rng, 1, 32, 24), _f32(rng, 3 * 2 * 16, 24)
    attend = _self_attention(2, 16, scale_after=False)
    cg = _compiled(lambda x: attend(F.matmul(x, mge.tensor(w), transpose_b=True)), x)
    assert cg.rules == ["dense", "attention"]
    # no slice or transpose of the projection, and the kernel writes (b, s, h, d) itself
    assert not [k for k in cg.kernels if "slice" in k or "transpose" in k]
    qkv = x.astype(np.float64) @ w.T.astype(np.float64)
    assert rel_err(cg(x)[0], _self_attention_ref(qkv, 2, 16, 0.5)) <= TOL


def test_cross_attention_with_padded_rows_and_a_bias_epilogue(rng):
    """Separate q / k / v inputs (whole views), 13 query rows (padded to the 8-row tile),
    dv = 48 (16-wide output tiles) and a bias + ReLU on the output."""
    q, k, v = _f32(rng, 2, 3, 13, 16), _f32(rng, 2, 3, 32, 16), _f32(rng, 2, 3, 32, 48)
    bias = _f32(rng, 48)

    def fn(q, k, v):
        p = F.softmax(F.matmul(q, k, transpose_b=True) * 2.0, axis=-1)
        return F.relu(F.matmul(p, v) + mge.tensor(bias))
    cg = _compiled(fn, q, k, v)
    assert cg.rules == ["attention"]
    p = _softmax(q.astype(np.float64) @ np.swapaxes(k, -1, -2) * 2.0)
    assert rel_err(cg(q, k, v)[0], np.maximum(p @ v + bias, 0)) <= TOL


@pytest.mark.parametrize("case", ["dv-24", "t-20", "scores-returned", "broadcast-batch"])
def test_shapes_it_does_not_take_keep_the_matmul_rules(case, rng):
    t, dv, kb = {"dv-24": (32, 24, 2), "t-20": (20, 16, 2)}.get(case, (32, 16, 2))
    if case == "broadcast-batch":
        kb = 1
    q, k, v = _f32(rng, 2, 8, 16), _f32(rng, kb, t, 16), _f32(rng, kb, t, dv)

    def fn(q, k, v):
        s = F.matmul(q, k, transpose_b=True)
        out = F.matmul(F.softmax(s, axis=-1), v)
        return (out, s) if case == "scores-returned" else out
    cg = _compiled(fn, q, k, v)
    assert "attention" not in cg.rules and cg.rules.count("matmul") == 2
    p = _softmax(q.astype(np.float64) @ np.swapaxes(k, -1, -2))
    assert rel_err(cg(q, k, v)[0], p @ v) <= TOL


def test_switched_off_by_the_environment(rng, monkeypatch):
    monkeypatch.setenv("MEGTRACE_FUSED_ATTENTION", "0")
    x = _f32(rng, 1, 32, 3 * 2 * 16)
    cg = _compiled(_self_attention(2, 16), x)
    assert cg.rules == ["matmul", "matmul"]
    assert rel_err(cg(x)[0], _self_attention_ref(x, 2, 16, 0.25)) <= TOL


def test_a_view_read_elsewhere_is_still_computed(rng):
    """q feeds the attention and is also returned: its slice kernel stays."""
    x = _f32(rng, 1, 32, 3 * 2 * 16)

    def fn(x):
        qkv = x.reshape(1, 32, 3, 2, 16).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        return F.matmul(F.softmax(F.matmul(q, k, transpose_b=True), axis=-1), v), q * 2
    cg = _compiled(fn, x)
    assert "attention" in cg.rules
    out, q2 = cg(x)
    ref = x.astype(np.float64).reshape(1, 32, 3, 2, 16).transpose(2, 0, 3, 1, 4)
    assert rel_err(out, _softmax(ref[0] @ np.swapaxes(ref[1], -1, -2)) @ ref[2]) <= TOL
    assert rel_err(q2, ref[0] * 2) <= TOL


def test_heads_kept_in_place_when_the_output_is_also_read_unswapped(rng):
    """The attention output feeds the heads transpose and is returned as well: the kernel
    writes (b, h, s, d) and the transpose stays a kernel of its own."""
    x = _f32(rng, 2, 32, 3 * 2 * 16)

    def fn(x):
        qkv = x.reshape(2, 32, 3, 2, 16).transpose(2, 0, 3, 1, 4)
        ctx = F.matmul(F.softmax(F.matmul(qkv[0], qkv[1], transpose_b=True), axis=-1), qkv[2])
        return ctx.transpose(0, 2, 1, 3).reshape(2, 32, 32), ctx
    cg = _compiled(fn, x)
    assert cg.rules == ["attention"]
    assert [k for k in cg.kernels if "transpose" in k]
    ref = x.astype(np.float64).reshape(2, 32, 3, 2, 16).transpose(2, 0, 3, 1, 4)
    ctx = _softmax(ref[0] @ np.swapaxes(ref[1], -1, -2)) @ ref[2]
    merged, raw = cg(x)
    assert rel_err(raw, ctx) <= TOL
    assert rel_err(merged, ctx.transpose(0, 2, 1, 3).reshape(2, 32, 32)) <= TOL
