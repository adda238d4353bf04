"""Gradient clipping, in place on each tensor's `.grad` (MegEngine's clip_grad)."""
from __future__ import annotations

from typing import Iterable, Union

from ..functional import clip, concat, minimum, norm
from ..tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_value"]


def clip_grad_norm(tensors: Union[Tensor, Iterable[Tensor]], max_norm: float,
                   ord: float = 2.0) -> Tensor:
    """Scale all gradients by min(1, max_norm / (total_norm + 1e-6)), the total norm
    taken over all gradients as one vector; returns that total norm."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t.grad is not None]
    if len(tensors) == 0:
        return Tensor(0.0)
    norms = [norm(t.grad.flatten(), ord=ord) for t in tensors]
    total = norm(concat(norms), ord=ord) if len(norms) > 1 else norms[0]
    scale = minimum(max_norm / (total + 1e-6), 1)
    for t in tensors:
        t.grad._reset(t.grad * scale)
    return total


def clip_grad_value(tensors: Union[Tensor, Iterable[Tensor]], lower: float,
                    upper: float) -> None:
    """Clip every gradient to [lower, upper]."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    for t in tensors:
        if t.grad is not None:
            t.grad._reset(clip(t.grad, lower, upper))
