"""Loss functions with MegEngine 1.13's names, arguments and compositions (reachable as
`F.nn.<loss>` and `F.loss.<loss>`)."""
from __future__ import annotations

import functools

from ..tensor import Tensor
from ._convert import require_tensor
from .elemwise import abs, log, logsigmoid, relu  # noqa: A004
from .math import logsumexp
from .onehot import indexing_one_hot
from .reduction import mean, sum  # noqa: A004

__all__ = ["l1_loss", "square_loss", "cross_entropy", "binary_cross_entropy", "hinge_loss",
           "ctc_loss"]


def _reduce_output(loss_fn):
    """MegEngine's `reduction=` argument: 'none', or the mean/sum over every element."""
    @functools.wraps(loss_fn)
    def reduced(*args, reduction: str = "mean", **kwargs) -> Tensor:
        loss = loss_fn(*args, **kwargs)
        if reduction == "none":
            return loss
        if reduction == "mean":
            return mean(loss)
        if reduction == "sum":
            return sum(loss)
        raise ValueError("{} is not a valid value for reduction".format(reduction))
    return reduced


@_reduce_output
def l1_loss(pred: Tensor, label: Tensor) -> Tensor:
    """|pred - label|."""
    return abs(require_tensor("l1_loss", pred) - label)


@_reduce_output
def square_loss(pred: Tensor, label: Tensor) -> Tensor:
    """(pred - label) ** 2."""
    diff = require_tensor("square_loss", pred) - label
    return diff * diff


@_reduce_output
def cross_entropy(pred: Tensor, label: Tensor, axis: int = 1, with_logits: bool = True,
                  label_smooth: float = 0) -> Tensor:
    """Multi-class cross entropy of `pred` (logits, or probabilities with
    with_logits=False) against integer class labels; `label_smooth` mixes in the uniform
    distribution."""
    pred = require_tensor("cross_entropy", pred)
    label = require_tensor("cross_entropy", label)
    n0, n1 = pred.ndim, label.ndim
    assert n0 == n1 + 1, ("target ndim must be one less than input ndim; input_ndim={} "
                          "target_ndim={}".format(n0, n1))
    ls = label_smooth
    if with_logits:
        log_z = logsumexp(pred, axis)
        primary = indexing_one_hot(pred, label, axis)
    else:
        log_z = 0
        primary = log(indexing_one_hot(pred, label, axis))
    if ls is None or type(ls) in (int, float) and ls == 0:
        return log_z - primary
    if not with_logits:
        pred = log(pred)
    return log_z - ls * mean(pred, axis) - (1 - ls) * primary


@_reduce_output
def binary_cross_entropy(pred: Tensor, label: Tensor, with_logits: bool = True) -> Tensor:
    """Binary cross entropy of `pred` (logits, or probabilities with with_logits=False)."""
    pred = require_tensor("binary_cross_entropy", pred)
    if not with_logits:
        return -(label * log(pred) + (1 - label) * log(1 - pred))
    return -(label * logsigmoid(pred) + (1 - label) * logsigmoid(-pred))


@_reduce_output
def hinge_loss(pred: Tensor, label: Tensor, norm: str = "L1") -> Tensor:
    """sum over axis 1 of max(0, 1 - pred * label) ("L1") or its square ("L2")."""
    norm = norm.upper()
    assert norm in ["L1", "L2"], "norm must be L1 or L2"
    loss = relu(1.0 - require_tensor("hinge_loss", pred) * label)
    return sum(loss, axis=1) if norm == "L1" else sum(loss * loss, axis=1)


from .ctc import ctc_loss  # noqa: E402  (composes elemwise/tensor functionals)
