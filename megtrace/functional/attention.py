"""`F.nn.multi_head_attention`: MegEngine 1.13's multi-head attention with its packed
`io_weight_bias` parameter.

MegEngine 1.13's CPU runs its MultiHeadAttn op through a proxy kernel; this computation
matches it (tests/modelfile/test_mha_dump.py, test_mha_masks.py: golden data from real
MegEngine). Without dropout, it is one `multi_head_attn` op (ops/attention.py), masks
and returned attention weights included, dumped as MegEngine's MultiHeadAttn opr and read
back from it (fbs/read_mha.py); the other forms are composed of the ops below.
`is_causal` without any mask is computed with a causal mask (MegEngine 1.13's CPU
kernel fails there: it adds an absent mask) and dumped with that mask as a constant.
The packed parameter holds, in this order, the query, key, value and output projection
weights, then the query, key, value and output biases (each present only when its
projection size is nonzero, and a bias only when its flag is set). A projection is
Y = X @ W + B (not X @ W^T), so each weight is a row-major (input features, projection
size) block. Heads split the projected features into `num_heads` consecutive chunks (a
projection size of 0 leaves the input whole, for every head; an output size of 0 returns
the merged heads); the scores are scaled by (embed_dim // num_heads) ** -0.5, or
embed_dim ** -0.5 without a query projection.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..dispatch import apply
from ..ops.attention import head_dims, packed_size, unpack
from ..tensor import Tensor
from .elemwise import add, mul
from .nn import dropout, matmul, softmax
from .tensor_ops import broadcast_to, expand_dims, reshape, transpose, zeros_like

__all__ = ["multi_head_attention"]

_UNSUPPORTED = (" The reason is that there is only cudnn implementation now, and we may "
                "try to loosen this option after submitting the commit that adds MHA proxy "
                "implementation.")


def multi_head_attention(query: Tensor, key: Tensor, value: Tensor, embed_dim: int,
                         num_heads: int, attn_drop: float, out_drop: float,
                         io_weight_bias: Optional[Tensor],
                         qproj_size: Optional[int] = None, kproj_size: Optional[int] = None,
                         vproj_size: Optional[int] = None, oproj_size: Optional[int] = None,
                         qbias: bool = False, kbias: bool = False, vbias: bool = False,
                         obias: bool = False, bias_k: Optional[Tensor] = None,
                         bias_v: Optional[Tensor] = None, add_zero_attn: bool = False,
                         key_padding_mask: Optional[Tensor] = None,
                         attn_mask: Optional[Tensor] = None, need_weights: bool = False,
                         average_attn_weights: bool = False, is_causal: bool = False,
                         maybe_cudnn_style_mask: bool = False, reslink: bool = False,
                         training: bool = True):
    """(attn_output (N, L, embed_dim), attn_weights or None); attn_weights are the
    softmax outputs, (N * num_heads, L, S), or (N, L, S) with average_attn_weights.
    Unbatched (2-d) inputs get a batch axis of 1, as in MegEngine. See the module
    docstring for the packed weight layout."""
    sizes = {name: embed_dim if s is None else s for name, s in
             (("q", qproj_size), ("k", kproj_size), ("v", vproj_size), ("o", oproj_size))}
    for flag, name, word in ((qbias, "q", "query"), (kbias, "k", "key"),
                             (vbias, "v", "value"), (obias, "o", "output")):
        if flag:
            assert sizes[name] > 0, (f"when {word} projection bias is true, {word} "
                                     "projection weight must be given.")
    assert add_zero_attn is False, ("add_zero_attn should be False, and configuration of "
                                    "this parameter is not supported now." + _UNSUPPORTED)
    assert bias_k is None, ("bias_k should be None, and configuration of this parameter is "
                            "not supported now." + _UNSUPPORTED)
    assert bias_v is None, ("bias_v should be None, and configuration of this parameter is "
                            "not supported now." + _UNSUPPORTED)
    assert reslink is False, ("reslink should be False, and configuration of this parameter "
                              "is not supported now." + _UNSUPPORTED)
    if maybe_cudnn_style_mask:
        raise NotImplementedError("multi_head_attention: maybe_cudnn_style_mask describes "
                                  "cuDNN's sequence-window masks; megtrace has no cuDNN "
                                  "kernel for them")
    for name, s in sizes.items():
        if name != "o" and s % num_heads:
            raise ValueError(f"multi_head_attention: {name}proj_size={s} must be divisible "
                             f"by num_heads={num_heads}")
    dims = (query.shape[-1], key.shape[-1], value.shape[-1])
    params = {"num_heads": num_heads, **{f"{c}proj_size": sizes[c] for c in "qkvo"},
              "qbias": bool(qbias), "kbias": bool(kbias), "vbias": bool(vbias),
              "obias": bool(obias),
              "sm_scaler": (embed_dim if sizes["q"] == 0 else embed_dim // num_heads) ** -0.5}
    per_head = head_dims(dims, params)
    if per_head[0] != per_head[1]:
        raise ValueError(f"multi_head_attention: queries meet keys per head, but a query "
                         f"head has {per_head[0]} features and a key head {per_head[1]} "
                         f"(qproj_size={sizes['q']}, kproj_size={sizes['k']}, inputs "
                         f"{dims[0]} and {dims[1]}; a size of 0 leaves the input whole)")
    batched = _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = (expand_dims(t, 0) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = expand_dims(key_padding_mask, 0)
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
    mask = _merged_mask(attn_mask, key_padding_mask, query, key, is_causal, num_heads)

    operands = (query, key, value, io_weight_bias) + (() if mask is None else (mask,))
    plain = (not (training and (attn_drop > 0 or out_drop > 0)) and
             tuple(io_weight_bias.shape) == (1, packed_size(dims, params)) and
             all(t.dtype == np.float32 for t in operands))
    if plain:       # one op, dumped as MegEngine's MultiHeadAttn (ops/attention.py)
        if mask is not None:    # MegEngine's _merge_masks: is_causal's hint kept
            params["attn_mask_type"] = "DEFAULT_MASK" if is_causal and \
                key_padding_mask is None else "USER_DEFINED_MASK"
        if not need_weights:
            return apply("multi_head_attn", *operands, **params), None
        out, weights = apply("multi_head_attn", *operands, **params, need_weights=True)
        return out, _averaged(weights, num_heads) if average_attn_weights else weights
    if any(s == 0 for s in sizes.values()):
        raise NotImplementedError("multi_head_attention: a projection size of 0 (no "
                                  "projection) is only supported in float32 without "
                                  "dropout (MegEngine's MultiHeadAttn op)")
    q_w, k_w, v_w, o_w, q_b, k_b, v_b, o_b = _unpack(io_weight_bias, dims, params)
    n, length, source = query.shape[0], query.shape[1], key.shape[1]
    q = _heads(_project(query, q_w, q_b), num_heads)          # (N*h, L, dq)
    k = _heads(_project(key, k_w, k_b), num_heads)            # (N*h, S, dq)
    v = _heads(_project(value, v_w, v_b), num_heads)          # (N*h, S, dv)
    scores = mul(matmul(q, k, transpose_b=True), params["sm_scaler"])
    if mask is not None:
        scores = add(scores, mask)
    weights = softmax(scores, axis=-1)
    probs = dropout(weights, attn_drop, training) if training and attn_drop > 0 else weights
    heads = matmul(probs, v)                                  # (N*h, L, dv)
    merged = reshape(transpose(reshape(heads, (n, num_heads, length, -1)), (0, 2, 1, 3)),
                     (n, length, sizes["v"]))
    out = _project(merged, o_w, o_b)
    if training and out_drop > 0:
        out = dropout(out, out_drop, training)
    if not need_weights:
        return out, None
    return out, _averaged(weights, num_heads) if average_attn_weights else weights


def _averaged(weights: Tensor, num_heads: int) -> Tensor:
    """(N * h, L, S) -> (N, L, S): the mean over heads."""
    return reshape(weights, (-1, num_heads, *weights.shape[1:])).mean(axis=1)


def _project(x: Tensor, w: Tensor, b: Optional[Tensor]) -> Tensor:
    y = matmul(x, w)
    return y if b is None else add(y, b)


def _heads(x: Tensor, num_heads: int) -> Tensor:
    """(N, T, h * d) -> (N * h, T, d): head i takes features [i*d, (i+1)*d)."""
    n, t, f = x.shape
    return reshape(transpose(reshape(x, (n, t, num_heads, f // num_heads)), (0, 2, 1, 3)),
                   (n * num_heads, t, f // num_heads))


def _unpack(packed: Tensor, dims, params: dict):
    """The eight parts of io_weight_bias (None where absent), in MegEngine's order."""
    need = packed_size(dims, params)
    if packed.size != need:
        raise ValueError(f"multi_head_attention: io_weight_bias has {packed.size} elements; "
                         f"these projection sizes and biases need {need}")
    return unpack(packed, dims, params)


def _canonical_mask(mask: Optional[Tensor], name: str, dtype) -> Optional[Tensor]:
    """Bool masks become additive float masks: -inf where True."""
    if mask is None:
        return None
    floating = mask.dtype in (np.float16, np.float32, np.float64)
    assert mask.dtype == bool or floating, \
        f"only bool and floating types of {name} are supported"
    if floating:
        return mask
    out = zeros_like(mask).astype(dtype)
    out[mask] = float("-inf")
    return out


def _merged_mask(attn_mask, key_padding_mask, query, key, is_causal: bool, num_heads: int):
    """MegEngine's _merge_masks: one additive mask broadcastable to (N*h, L, S)."""
    n, length, source = query.shape[0], query.shape[1], key.shape[1]
    if is_causal and key_padding_mask is None:
        if attn_mask is not None:
            return attn_mask
        causal = np.triu(np.full((length, source), -np.inf, np.float32), k=1)
        return Tensor(causal.astype(query.dtype))
    if attn_mask is not None and key_padding_mask is None:
        return attn_mask
    if key_padding_mask is not None and attn_mask is None:
        padded = broadcast_to(reshape(key_padding_mask, (n, 1, 1, source)),
                              (n, num_heads, length, source))
        return reshape(padded, (n * num_heads, length, source))
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            both = add(attn_mask, reshape(key_padding_mask, (n, 1, source)))
            both = broadcast_to(reshape(both, (n, 1, length, source)),
                                (n, num_heads, length, source))
        else:
            both = add(reshape(attn_mask, (n, num_heads, length, source)),
                       reshape(key_padding_mask, (n, 1, 1, source)))
        return reshape(both, (n * num_heads, length, source))
    return None


def _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    """MegEngine's _mha_shape_check (its assertion messages); True when batched."""
    q_dim, k_dim, v_dim = query.ndim, key.ndim, value.ndim
    kpm = tuple(key_padding_mask.shape) if key_padding_mask is not None else None
    am = tuple(attn_mask.shape) if attn_mask is not None else None
    if q_dim == 3:
        assert k_dim == 3 and v_dim == 3, (
            "For batched (3-D) `query`, expected `key` and `value` to be 3-D"
            f" but found {k_dim}-D and {v_dim}-D tensors respectively")
        (q0, q1, _), (k0, k1, _), (v0, v1, _) = query.shape, key.shape, value.shape
        assert q0 == k0 and k0 == v0, (
            "For batched (3-D) `query`, expected the batch sizes of `query`, `key` and "
            f"`value` to be equal but found query batch size is {q0}, key batch size is "
            f"{k0} and value batch size is {v0} respectively")
        assert k1 == v1, (
            "For batched (3-D) `query`, expected the sequence length of `key` and `value` "
            f"to be equal but found key seqlen is {k1} and value seqlen is {v1} respectively")
        if kpm is not None:
            assert len(kpm) == 2, (
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D"
                f" but found {len(kpm)}-D tensor instead")
            assert kpm == (k0, k1), (
                f"For batched (3-D) `query`, expected `key_padding_mask.shape` equal "
                f"{k0, k1} but found {kpm} instead")
        if am is not None:
            assert len(am) in (2, 3), (
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                f" but found {len(am)}-D tensor instead")
            want = (q1, k1) if len(am) == 2 else (q0 * num_heads, q1, k1)
            assert am == want, f"Expected `attn_mask` shape to be {want} but got {am}"
        return True
    if q_dim == 2:
        assert k_dim == 2 and v_dim == 2, (
            "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D"
            f" but found {k_dim}-D and {v_dim}-D tensors respectively")
        (q0, _), (k0, _), (v0, _) = query.shape, key.shape, value.shape
        assert k0 == v0, (
            "For unbatched (3-D) `query`, expected the sequence length of `key` and `value` "
            f"to be equal but found key seqlen is {k0} and query seqlen is {v0} respectively")
        if kpm is not None:
            assert kpm == (k0,), (
                f"For unbatched (2-D) `query`, expected `key_padding_mask.shape` equal "
                f"{(k0,)} but found {kpm} tensor instead")
        if am is not None:
            assert len(am) in (2, 3), (
                "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                f" but found {len(am)}-D tensor instead")
            want = (q0, k0) if len(am) == 2 else (num_heads, q0, k0)
            assert am == want, f"Expected `attn_mask` shape to be {want} but got {am}"
        return False
    raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                         f"{q_dim}-D query tensor")
