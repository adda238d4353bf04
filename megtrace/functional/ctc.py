"""`F.nn.ctc_loss`: MegEngine 1.13's Connectionist Temporal Classification loss, composed
of functionals the way MegEngine composes it (a log-space forward recursion over the
blank-expanded labels, unrolled over time), so it traces, compiles and dumps."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._convert import require_tensor
from .elemwise import log, maximum
from .elemwise_extra import logaddexp
from .math import cumsum, equal
from .tensor_ops import broadcast_to, linspace, ones, zeros

__all__ = ["ctc_loss"]


def _repeat_index(lengths: Tensor) -> Tensor:
    """[0]*l0 + [1]*l1 + ...: the sequence each concatenated label belongs to."""
    ends = cumsum(lengths, axis=0)
    marks = zeros(int(lengths.sum()), dtype="int32")
    marks[ends[:-1]] = 1
    return cumsum(marks, axis=0)


def _tile_index(lengths: Tensor) -> Tensor:
    """0..l0-1, 0..l1-1, ...: each concatenated label's place in its sequence."""
    ends = cumsum(lengths, axis=0)
    steps = ones(int(lengths.sum()), dtype="int32")
    steps[ends[:-1]] = -(lengths - 1)[:-1]
    return cumsum(steps, axis=0) - 1


def _expand_label(label: Tensor, label_lengths: Tensor, blank: int) -> Tensor:
    """(N, 2 * S + 1) labels with a blank before, between and after the symbols."""
    n = label_lengths.shape[0]
    if label.ndim == 1:
        unpacked = zeros((n, int(label_lengths.max())), dtype="int32") + blank
        unpacked[_repeat_index(label_lengths), _tile_index(label_lengths)] = label
        label = unpacked
    expanded = zeros((n, label.shape[1] * 2 + 1), dtype="int32") + blank
    expanded[:, 1::2] = label
    return expanded


def _safelog(x: Tensor) -> Tensor:
    return log(maximum(x, np.finfo(x.dtype).tiny))


def ctc_loss(pred: Tensor, pred_lengths: Tensor, label: Tensor, label_lengths: Tensor,
             blank: int = 0, reduction: str = "mean") -> Tensor:
    """CTC loss of probabilities `pred` (T, N, C) (not log-probabilities), with
    `pred_lengths` (N,), labels (N, S) or concatenated (sum(label_lengths),) without
    blanks, `label_lengths` (N,). reduction: 'none' (per sequence), 'sum', or 'mean'
    (each loss divided by its label length, then averaged)."""
    pred = require_tensor("ctc_loss", pred)
    pred_lengths, label, label_lengths = (require_tensor("ctc_loss", t) for t in
                                          (pred_lengths, label, label_lengths))
    T, N, C = pred.shape
    assert pred_lengths.size == N, \
        "pred_lengths must be equal to batch_size {}, but got {}".format(N, pred_lengths.size)
    assert label_lengths.size == N, \
        "label_lengths must be euqal to batch_size {}, but got {}".format(N, label_lengths.size)
    assert 0 <= blank < C, "blank must be in label range [0, {}), but got {}".format(C, blank)
    assert pred_lengths.min() > 0 and pred_lengths.max() <= T, \
        "pred_lengths must be in range ({}, {}], bug got min {}, max {}".format(
            0, T, pred_lengths.min(), pred_lengths.max())
    if label.ndim == 1:
        assert label_lengths.min() > 0, "label lengths muse be positive"
        assert label.size == label_lengths.sum(), \
            "label size must be equal to sum(label_lengths)"
    else:
        S = label.shape[1]
        assert label_lengths.min() > 0 and label_lengths.max() <= S, \
            "label_lengths must be in range ({}, {}], bug got min {}, max {}".format(
                0, S, label_lengths.min(), label_lengths.max())
    if reduction not in ("mean", "sum", "none"):
        raise ValueError("{} is not a valid value for reduction".format(reduction))

    label = _expand_label(label, label_lengths, blank)
    # a skip over the blank between two different symbols is allowed (MegEngine keeps
    # the bool mask and lets 1 - mask promote; the float mask computes the same)
    label_mask = (label[:, 2:] != label[:, :-2]).astype("float32")
    L = label.shape[1]
    pred = pred.transpose(1, 0, 2)                     # (N, T, C)
    batch_idx = linspace(0, N - 1, N).astype("int32").reshape(-1)
    batch_idx_nl = broadcast_to(batch_idx.reshape(N, 1), (N, L)).reshape(-1)
    match_pred = pred[batch_idx_nl, :, label.reshape(-1)].reshape(N, L, -1)  # (N, L, T)

    log_alpha = zeros((N, L), dtype="float32")
    log_alpha[:, :2] = match_pred[:, :2, 0]
    log_alpha = _safelog(log_alpha)
    last, before_last = label_lengths * 2, label_lengths * 2 - 1
    ret = -logaddexp(log_alpha[batch_idx, last], log_alpha[batch_idx, before_last]) * \
        equal(pred_lengths - 1, 0)
    for t in range(1, T):
        two_back = log_alpha[:, :-2]
        log_alpha[:, 1:] = logaddexp(log_alpha[:, 1:], log_alpha[:, :-1])
        log_alpha[:, 2:] = log_alpha[:, 2:] * (1 - label_mask) + \
            logaddexp(log_alpha[:, 2:], two_back) * label_mask
        log_alpha += _safelog(match_pred[:, :, t])
        ret_t = -logaddexp(log_alpha[batch_idx, last], log_alpha[batch_idx, before_last])
        ret += ret_t * equal(pred_lengths - 1, t)
    if reduction == "mean":
        return (ret / label_lengths).mean()
    if reduction == "sum":
        return ret.sum()
    return ret
