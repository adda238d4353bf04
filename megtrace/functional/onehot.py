"""`F.one_hot` and `F.nn.indexing_one_hot` with MegEngine's arguments."""
from __future__ import annotations

from ..dispatch import apply
from ..tensor import Tensor
from ._convert import cast, require_tensor
from .tensor_ops import squeeze

__all__ = ["one_hot", "indexing_one_hot"]


def one_hot(inp: Tensor, num_classes: int) -> Tensor:
    """One-hot encoding along a new last axis, in the input's dtype."""
    return apply("one_hot", require_tensor("one_hot", inp), num_classes=int(num_classes))


def indexing_one_hot(src: Tensor, index: Tensor, axis: int = 1, keepdims=False) -> Tensor:
    """src[..., index[...], ...] along `axis` (one picked element per position)."""
    assert isinstance(src, Tensor), "src must be of Tensor type"
    index = cast(require_tensor("indexing_one_hot", index), "int32")
    axis = int(axis) % src.ndim if src.ndim else 0
    out = apply("indexing_one_hot", src, index, axis=axis)
    return out if keepdims else squeeze(out, axis)
