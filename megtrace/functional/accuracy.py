"""`topk_accuracy` (MegEngine 1.13's functional/metric.py, also in functional/utils.py)."""
from __future__ import annotations

from typing import Iterable, Union

import numpy as np

from ..dispatch import apply
from ..errors import ShapeError
from ..tensor import Tensor
from ._convert import require_tensor
from .tensor_ops import broadcast_to, reshape

__all__ = ["topk_accuracy"]


def topk_accuracy(logits: Tensor, target: Tensor, topk: Union[int, Iterable[int]] = 1
                  ) -> Union[Tensor, Iterable[Tensor]]:
    """Fraction of rows whose `target` label is among the k largest logits, for each k of
    `topk` (a float32 scalar, or a list of them when `topk` is a sequence of several)."""
    ks = (topk,) if isinstance(topk, int) else tuple(topk)
    logits, target = require_tensor("topk_accuracy", logits), require_tensor("topk_accuracy",
                                                                             target)
    if logits.ndim != 2:
        raise ShapeError(f"topk_accuracy: logits must be (batch_size, num_classes); got shape "
                         f"{tuple(logits.shape)}")
    # the topk op itself (F.topk's k clamp: a k beyond num_classes takes every class)
    _, pred = apply("topk", logits, k=min(max(ks), logits.shape[1]), descending=True)
    n = target.shape[0]
    column = reshape(target, (n, 1))
    accs = []
    for k in ks:
        correct = pred[:, :k].detach() == broadcast_to(column, (n, k))
        accs.append(correct.astype(np.float32).sum() / n)
    return accs[0] if len(ks) == 1 else accs

