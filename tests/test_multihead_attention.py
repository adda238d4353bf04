"""M.MultiHeadAttention / F.nn.multi_head_attention against an independent NumPy reading
of MegEngine's documented packed `io_weight_bias` layout (q, k, v, out weights as
(in, proj) blocks for Y = X @ W + B, then the four biases), heads as consecutive feature
chunks, scale (embed_dim/heads)**-0.5 (real MegEngine's outputs: tests/modelfile/
test_mha_dump.py, test_mha_masks.py)."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace


def _reference(q, k, v, packed, embed, heads, kdim, vdim, bias, mask=None):
    packed = packed.astype(np.float64).reshape(-1)
    sizes = [(embed, embed), (kdim, embed), (vdim, embed), (embed, embed)]
    ws, at = [], 0
    for a, b in sizes:
        ws.append(packed[at:at + a * b].reshape(a, b))
        at += a * b
    bs = [packed[at + i * embed:at + (i + 1) * embed] if bias else np.zeros(embed)
          for i in range(4)]
    n, length, source, d = q.shape[0], q.shape[1], k.shape[1], embed // heads
    qp, kp, vp = (x.astype(np.float64) @ w + b for x, w, b in zip((q, k, v), ws, bs))
    out = np.zeros((n, length, embed))
    weights = np.zeros((n * heads, length, source))
    for b in range(n):
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            s = qp[b, :, cols] @ kp[b, :, cols].T / np.sqrt(d)
            if mask is not None:
                s = s + mask[b * heads + h]
            p = np.exp(s - s.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            weights[b * heads + h] = p
            out[b, :, cols] = p @ vp[b, :, cols]
    return out @ ws[3] + bs[3], weights


def _inputs(rng, n=2, length=3, source=4, embed=8, kdim=6, vdim=5):
    return (rng.standard_normal((n, length, embed)).astype(np.float32),
            rng.standard_normal((n, source, kdim)).astype(np.float32),
            rng.standard_normal((n, source, vdim)).astype(np.float32))


@pytest.mark.parametrize("bias", [True, False])
def test_matches_the_documented_definition(bias, rng):
    m = M.MultiHeadAttention(8, 2, kdim=6, vdim=5, bias=bias).eval()
    packed = rng.uniform(-0.5, 0.5, size=(1, m.weight_bias_len)).astype(np.float32)
    m.load_state_dict({"io_weight_bias": packed})
    q, k, v = _inputs(rng)
    out, weights = m(mge.tensor(q), mge.tensor(k), mge.tensor(v), need_weights=True)
    want, want_w = _reference(q, k, v, packed, 8, 2, 6, 5, bias)
    assert rel_err(out.numpy(), want) <= 1e-5
    assert rel_err(weights.numpy(), want_w) <= 1e-5
    _, avg = m(mge.tensor(q), mge.tensor(k), mge.tensor(v), need_weights=True,
               average_attn_weights=True)
    assert rel_err(avg.numpy(), want_w.reshape(2, 2, 3, 4).mean(axis=1)) <= 1e-5
    assert m(mge.tensor(q), mge.tensor(k), mge.tensor(v))[1] is None


def test_masks(rng):
    m = M.MultiHeadAttention(8, 2).eval()
    packed = m.io_weight_bias.numpy()
    q, k, v = _inputs(rng, kdim=8, vdim=8)
    kpm = np.array([[False, False, True, False], [True, False, False, False]])
    neg = np.where(kpm, -np.inf, 0.0)
    out = m(mge.tensor(q), mge.tensor(k), mge.tensor(v), key_padding_mask=mge.tensor(kpm))[0]
    want = _reference(q, k, v, packed, 8, 2, 8, 8, True,
                      np.repeat(neg[:, None, :], 3, axis=1).repeat(2, axis=0))[0]
    assert rel_err(out.numpy(), want) <= 1e-5
    attn = rng.standard_normal((3, 4)).astype(np.float32)       # float: added as is
    out = m(mge.tensor(q), mge.tensor(k), mge.tensor(v), attn_mask=mge.tensor(attn),
            key_padding_mask=mge.tensor(kpm))[0]
    merged = (attn[None] + neg[:, None, :]).repeat(2, axis=0)
    want = _reference(q, k, v, packed, 8, 2, 8, 8, True, merged)[0]
    assert rel_err(out.numpy(), want) <= 1e-5
    q2 = rng.standard_normal((2, 4, 8)).astype(np.float32)
    out = m(mge.tensor(q2), mge.tensor(k), mge.tensor(v), is_causal=True)[0]
    causal = np.triu(np.full((4, 4), -np.inf), k=1)
    want = _reference(q2, k, v, packed, 8, 2, 8, 8, True, np.broadcast_to(causal, (4, 4, 4)))[0]
    assert rel_err(out.numpy(), want) <= 1e-5


def test_functional_is_under_nn_too():
    assert F.nn.multi_head_attention is F.multi_head_attention


def test_megengines_refusals(rng):
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        M.MultiHeadAttention(8, 3)
    with pytest.raises(AssertionError, match="add_bias_kv should be set to False"):
        M.MultiHeadAttention(8, 2, add_bias_kv=True)
    m = M.MultiHeadAttention(8, 2)
    q = mge.tensor(np.zeros((2, 3, 8), np.float32))
    with pytest.raises(AssertionError, match="expected `key` and `value` to be 3-D"):
        m(q, mge.tensor(np.zeros((3, 8), np.float32)), mge.tensor(np.zeros((3, 8), np.float32)))
    with pytest.raises(AssertionError, match="Expected `attn_mask` shape to be"):
        m(q, q, q, attn_mask=mge.tensor(np.zeros((2, 2), np.float32)))
    with pytest.raises(ValueError, match="io_weight_bias has 10 elements"):
        F.nn.multi_head_attention(q, q, q, 8, 2, 0.0, 0.0,
                                  mge.tensor(np.zeros((1, 10), np.float32)))


@pytest.mark.lite
def test_traced_compiled_and_dumped_runs_in_lite(lite, rng, tmp_path):
    m = M.MultiHeadAttention(8, 2, kdim=6, vdim=5).eval()

    @trace(symbolic=True, capture_as_const=True)
    def attend(q, k, v):
        return m(q, k, v, need_weights=True)
    q, k, v = _inputs(rng)
    want = [t.numpy() for t in m(mge.tensor(q), mge.tensor(k), mge.tensor(v),
                                 need_weights=True)]
    for _ in range(2):
        got = attend(mge.tensor(q), mge.tensor(k), mge.tensor(v))
        for g, w in zip(got, want):
            assert rel_err(g.numpy(), w) <= 1e-5
    path = tmp_path / "mha.mge"
    attend.dump(path, arg_names=["q", "k", "v"], output_names=["out", "weights"])
    outs = lite.run_model(path, {"q": q, "k": k, "v": v})
    assert rel_err(outs["out"], want[0]) <= 1e-5
    assert rel_err(outs["weights"], want[1]) <= 1e-5
