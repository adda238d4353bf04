"""Activation, dropout, embedding and adaptive pooling layers with MegEngine's signatures."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import functional as F
from ..tensor import Parameter
from .layers import ReLU  # noqa: F401  (megengine.module.activation.ReLU)
from .module import Module


class Softmax(Module):
    def __init__(self, axis: Optional[int] = None, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def forward(self, inputs):
        return F.softmax(inputs, self.axis)

    def _module_info_string(self) -> str:
        return f"axis={self.axis}"


class Sigmoid(Module):
    def forward(self, inputs):
        return F.sigmoid(inputs)


class SiLU(Module):
    def forward(self, inputs):
        return F.silu(inputs)


class GELU(Module):
    def forward(self, inputs):
        return F.gelu(inputs)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, **kwargs):
        super().__init__(**kwargs)
        self.negative_slope = negative_slope

    def forward(self, inputs):
        return F.leaky_relu(inputs, self.negative_slope)


class PReLU(Module):
    """max(0, x) + a * min(0, x) with a learnable slope `a`: one shared value, or one per
    channel (axis 1) with `num_parameters` = C, stored as (1, C, 1, 1)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, **kwargs):
        super().__init__(**kwargs)
        self.num_parameters = num_parameters
        if num_parameters > 1:
            self.weight = Parameter(np.full((1, num_parameters, 1, 1), init, np.float32))
        else:
            self.weight = Parameter(np.array([init], np.float32))

    def forward(self, inputs):
        weight = self.weight
        if weight.ndim == 4 and inputs.ndim != 4:
            weight = F.reshape(weight, (1, -1) + (1,) * (inputs.ndim - 2))
        return F.add(F.maximum(inputs, 0.0), F.mul(weight, F.minimum(inputs, 0.0)))


class Identity(Module):
    """Its input itself. (MegEngine returns `copy(x)`, which its dump then drops; a copy
    op here would be written into dumps as an Identity opr MegEngine's files do not
    have, so writing into the result also writes into x.)"""

    def forward(self, x):
        return x


class Dropout(Module):
    """Identity in eval mode; in training mode zeroes with probability `drop_prob`."""

    def __init__(self, drop_prob: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.drop_prob = drop_prob

    def forward(self, inputs):
        return F.dropout(inputs, self.drop_prob, training=self.training)

    def _module_info_string(self) -> str:
        return f"drop_prob={self.drop_prob}"


class Embedding(Module):
    """A (num_embeddings, embedding_dim) table ~ N(0, 1) looked up by integer tensors."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
                 norm_type: Optional[float] = None, initial_weight=None, freeze: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        if initial_weight is not None:
            weight = np.asarray(getattr(initial_weight, "numpy", lambda: initial_weight)(),
                                np.float32)
            if weight.shape != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: initial_weight has shape {weight.shape}, expected "
                                 f"{(num_embeddings, embedding_dim)}")
        else:
            weight = np.random.normal(size=(num_embeddings, embedding_dim)).astype(np.float32)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.freeze = freeze
        self.weight = Parameter(weight)

    def forward(self, inputs):
        return F.embedding(inputs, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: Optional[bool] = True,
                        padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
                        norm_type: Optional[float] = None) -> "Embedding":
        """An Embedding whose table is `embeddings` (2-d: rows x dim), MegEngine's."""
        shape = tuple(embeddings.shape)
        if len(shape) != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        return cls(num_embeddings=shape[0], embedding_dim=shape[1], initial_weight=embeddings,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   freeze=freeze)


class AdaptiveAvgPool2d(Module):
    def __init__(self, oshp, **kwargs):
        super().__init__(**kwargs)
        self.oshp = oshp

    def forward(self, inp):
        return F.adaptive_avg_pool2d(inp, self.oshp)


class AdaptiveMaxPool2d(Module):
    def __init__(self, oshp, **kwargs):
        super().__init__(**kwargs)
        self.oshp = oshp

    def forward(self, inp):
        return F.adaptive_max_pool2d(inp, self.oshp)
