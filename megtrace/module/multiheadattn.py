"""`M.MultiHeadAttention`: MegEngine 1.13's module over F.nn.multi_head_attention, with
its single packed `io_weight_bias` Parameter of shape (1, (2 * embed_dim + kdim + vdim) *
embed_dim [+ 4 * embed_dim with bias]): query, key, value, output weights (each a
row-major (input features, embed_dim) block: Y = X @ W + B), then the four biases. 1.13's
CPU runs it through a proxy kernel (masks and attention weights included; add_bias_kv
and add_zero_attn refused, as here); see megtrace/functional/attention.py."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..functional.attention import multi_head_attention
from ..tensor import Parameter, Tensor
from .init import xavier_uniform_
from .module import Module

_UNSUPPORTED = (" The reason is that there is only cudnn implementation now, and we may "
                "try to loosen this option after submitting the commit that adds MHA proxy "
                "implementation.")


class MultiHeadAttention(Module):
    """Multi-head attention with MegEngine 1.13's arguments and packed parameter.
    forward(query (N, L, embed_dim), key (N, S, kdim), value (N, S, vdim), ...) returns
    (output (N, L, embed_dim), attention weights or None)."""

    def __init__(self, embed_dim, num_heads, attn_dropout=0.0, out_dropout=0.0, bias=True,
                 add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self.add_bias_kv = add_bias_kv
        self.add_zero_attn = add_zero_attn
        self.num_heads = num_heads
        self.attn_dropout = attn_dropout
        self.out_dropout = out_dropout
        self.head_dim = embed_dim // num_heads
        assert self.head_dim * num_heads == self.embed_dim, \
            "embed_dim must be divisible by num_heads"
        assert add_bias_kv is False, ("add_bias_kv should be set to False, and configuration "
                                      "of this parameter is not supported now." + _UNSUPPORTED)
        assert add_zero_attn is False, ("add_zero_attn should be set to False, and "
                                        "configuration of this parameter is not supported "
                                        "now." + _UNSUPPORTED)
        self.bias = bias
        self.weight_bias_len = (self.embed_dim + self.kdim + self.vdim + self.embed_dim) * \
            self.embed_dim + (4 * self.embed_dim if self.bias else 0)
        self.io_weight_bias = Parameter(np.empty((1, self.weight_bias_len), np.float32))
        self.bias_k = None
        self.bias_v = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights, zero biases; MegEngine also resets both dropout rates
        to 0 here."""
        self.attn_dropout = 0.0
        self.out_dropout = 0.0
        xavier_uniform_(self.io_weight_bias)
        if self.bias:
            weights = (self.embed_dim + self.kdim + self.vdim + self.embed_dim) * self.embed_dim
            self.io_weight_bias[0, weights:] = 0

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                attn_mask: Optional[Tensor] = None, need_weights: bool = False,
                average_attn_weights: bool = False, is_causal: bool = False,
                maybe_cudnn_style_mask: bool = False):
        return multi_head_attention(
            query, key, value, self.embed_dim, self.num_heads, self.attn_dropout,
            self.out_dropout, self.io_weight_bias, qproj_size=self.embed_dim,
            kproj_size=self.embed_dim, vproj_size=self.embed_dim, oproj_size=self.embed_dim,
            qbias=self.bias, kbias=self.bias, vbias=self.bias, obias=self.bias,
            bias_k=self.bias_k, bias_v=self.bias_v, add_zero_attn=self.add_zero_attn,
            training=self.training, key_padding_mask=key_padding_mask,
            need_weights=need_weights, attn_mask=attn_mask,
            average_attn_weights=average_attn_weights, is_causal=is_causal,
            maybe_cudnn_style_mask=maybe_cudnn_style_mask)

    def _module_info_string(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.attn_dropout}, bias={self.bias}, kdim={self.kdim}, "
                f"vdim={self.vdim}")
