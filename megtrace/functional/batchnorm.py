"""`F.batch_norm` with MegEngine 1.13's arguments and semantics.

Inference mode is one BatchNorm opr. Training mode normalizes with the batch statistics,
composed of reductions and elementwise ops so that it traces and compiles like any
other code; with `inplace`, the running statistics are then updated (momentum weights
the old value; the variance is the unbiased one). Inside a trace the running statistics
are assigned traced values, like parameters an optimizer updates: the compiled graph
computes them and every replay assigns them again, without reading a value mid-step
(which would make each replay evaluate the forward pass before the compiled graph can
run).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import dtype as _dt
from ..core.tensor import amp as _amp
from ..dispatch import apply, note_undumpable
from ..tensor import Tensor
from ._convert import require_tensor
from .elemwise import add, mul, sqrt, sub
from .reduction import mean as _mean
from .tensor_ops import reshape

__all__ = ["batch_norm", "sync_batch_norm"]

# MegEngine's GraphError (a RuntimeError) when such a graph is dumped, then why
_TRAINING_BN = ("mean and variance in training mode BatchNorm must be SharedDeviceTensor or "
                "VolatileSharedDeviceTensor; got ImmutableTensor actually\n(the traced "
                "function ran BatchNorm in training mode, which updates its running "
                "statistics; a dumped graph cannot: call module.eval() before tracing a "
                "function to dump)")


_DIM_1C11 = "dim_1c11"


def _stat_4d(t: Optional[Tensor], c: int, fill: float, dtype) -> Tensor:
    """A (1, C, 1, 1) statistic: given 4-d, given flat (C,), or filled."""
    if t is None:
        return Tensor(np.full((1, c, 1, 1), fill, dtype))
    t = require_tensor("batch_norm", t)
    if _dt.name_of(t.dtype) != dtype:
        t = t.astype(dtype)
    return t if t.ndim == 4 else reshape(t, (1, c, 1, 1))


def _work_dtype(inp: Tensor, *stats: Optional[Tensor]) -> str:
    """float16 (or other sub-float32) data with float32 statistics computes in float32;
    otherwise the input's dtype."""
    same = inp.dtype
    name = _dt.name_of(same)
    for t in stats:
        if t is None:
            continue
        dtype = getattr(t, "dtype", _F32)
        if dtype is same:       # the common case (never wider than `name`): no np.dtype()
            continue
        dtype = np.dtype(dtype)
        if dtype.itemsize > np.dtype(name).itemsize and dtype.kind == "f":
            name = _dt.name_of(dtype)
    return name


_F32 = np.dtype(np.float32)


def _inference_4d(inp, mean, var, weight, bias, eps) -> Optional[Tensor]:
    """The common inference case, what the general path below computes, without its
    per-statistic conversions (a replayed trace runs this per BatchNorm, issue 11): a
    4-d input and four (1, C, 1, 1) statistics of its dtype. None for anything else."""
    if not isinstance(inp, Tensor) or inp.ndim != 4:
        return None
    dtype = inp.dtype
    for t in (weight, bias, mean, var):
        if not isinstance(t, Tensor):
            return None
        value = t._value            # a module's statistics: read the array directly
        if value is not None:
            if value.dtype is not dtype or value.ndim != 4:
                return None
        elif t.dtype is not dtype or t.ndim != 4:
            return None
    return apply("batch_norm", inp, weight, bias, mean, var, eps=float(eps))


def batch_norm(inp: Tensor, running_mean: Optional[Tensor] = None,
               running_var: Optional[Tensor] = None, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, *, training: bool = False,
               momentum: float = 0.9, eps: float = 1e-5, inplace: bool = True,
               compute_mode: str = "default", param_dim: str = "dim_1c11"):
    """Batch normalization over axis 1 of a 2-d, 3-d or 4-d input; statistics are
    (1, C, 1, 1) (or (C,)). Returns the output, or (output, new_mean, new_var) when
    training with running statistics and `inplace=False`."""
    if not training and param_dim is _DIM_1C11 and not _amp._enabled:
        y = _inference_4d(inp, running_mean, running_var, weight, bias, eps)
        if y is not None:
            return y
    if param_dim is not _DIM_1C11 and str(param_dim).lower() != "dim_1c11":
        raise ValueError(f"batch_norm: param_dim must be 'dim_1c11'; got {param_dim!r}")
    inp = require_tensor("batch_norm", inp)
    if _amp._enabled:     # MegEngine's amp: data in low precision, statistics in high
        inp = inp.astype(_amp._low_prec_dtype)
        weight, bias, running_mean, running_var = (
            t if t is None else require_tensor("batch_norm", t).astype(_amp._high_prec_dtype)
            for t in (weight, bias, running_mean, running_var))
    ndim = inp.ndim
    if ndim < 2:
        raise ValueError(f"batch_norm: expected an input with a channel axis; got shape "
                         f"{inp.shape}")
    has_mean, has_var = running_mean is not None, running_var is not None
    if not training:
        if not has_mean:
            raise AssertionError("running_mean must be provided in inference mode")
        if not has_var:
            raise AssertionError("running_var must be provided in inference mode")
    shape = tuple(inp.shape)
    c = shape[1]
    if training and inp.size == 0:    # nothing to normalize; statistics stay (MegEngine)
        return inp if inplace or not (has_mean or has_var) else (inp, running_mean,
                                                                  running_var)
    x4 = inp if ndim == 4 else reshape(inp, (shape[0], c, int(np.prod(shape[2:])), 1))
    # MegEngine's BatchNorm gives the input's dtype and computes float16 data with its
    # float32 parameters in float32
    out_dtype = _dt.name_of(inp.dtype)
    dtype = _work_dtype(inp, weight, bias, running_mean, running_var)
    x4 = x4 if out_dtype == dtype else x4.astype(dtype)
    w = _stat_4d(weight, c, 1.0, dtype)
    b = _stat_4d(bias, c, 0.0, dtype)
    if not training:
        y = apply("batch_norm", x4, w, b, _stat_4d(running_mean, c, 0.0, dtype),
                  _stat_4d(running_var, c, 1.0, dtype), eps=float(eps))
        y = y if out_dtype == dtype else y.astype(out_dtype)
        return y if ndim == 4 else reshape(y, shape)

    batch_mean = _mean(x4, axis=(0, 2, 3), keepdims=True)
    centered = sub(x4, batch_mean)
    batch_var = _mean(mul(centered, centered), axis=(0, 2, 3), keepdims=True)
    y = mul(centered, mul(w, 1.0 / sqrt(add(batch_var, float(eps)))))
    y = add(y, b)
    # (under autocast, sqrt and div compute in float32 whatever `dtype` is)
    y = y if _dt.name_of(y.dtype) == out_dtype else y.astype(out_dtype)
    y = y if inp.ndim == 4 else reshape(y, shape)
    if not (has_mean or has_var):
        return y

    n = inp.size // c
    new_mean = new_var = None
    if has_mean:
        old = _stat_4d(running_mean, c, 0.0, dtype)
        new_mean = add(mul(old, momentum), mul(batch_mean, 1 - momentum))
    if has_var:
        old = _stat_4d(running_var, c, 1.0, dtype)
        # MegEngine divides the squared deviations by n - 1: one sample per channel
        # gives 0/0, a NaN running variance
        unbiased = mul(batch_var, n / (n - 1) if n > 1 else float("inf"))
        new_var = add(mul(old, momentum), mul(unbiased, 1 - momentum))
    if not inplace:
        return y, new_mean, new_var
    note_undumpable(_TRAINING_BN)
    for target, new in ((running_mean, new_mean), (running_var, new_var)):
        if target is not None:
            _update_running(target, new)
    return y


def _update_running(target: Tensor, new: Tensor) -> None:
    """`target` (a running statistic) holds `new` from now on, with no gradient history."""
    target._reset(reshape(new, tuple(target.shape)).detach())


def sync_batch_norm(inp: Tensor, running_mean: Tensor, running_var: Tensor,
                    weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                    training: bool = False, momentum: float = 0.9, eps: float = 1e-5,
                    eps_mode: str = "additive", group=None) -> Tensor:
    """Batch normalization whose statistics MegEngine reduces over a process group.
    megtrace runs in one process, so the group's statistics are this batch's:
    `eps_mode="additive"` is `batch_norm`; "max" normalizes by max(var, eps) ** -0.5
    (4-d inputs only, as in MegEngine)."""
    mode = str(eps_mode).lower()
    assert mode in {"max", "additive"}, "unknown eps_mode: {}".format(eps_mode)
    if mode == "additive":
        return batch_norm(inp, running_mean, running_var, weight, bias, training=training,
                          momentum=momentum, eps=eps)
    inp = require_tensor("sync_batch_norm", inp)
    if inp.ndim != 4:
        raise NotImplementedError("sync_batch_norm for ndim != 4")
    from .elemwise import maximum
    c = inp.shape[1]
    w = _stat_4d(weight, c, 1.0, inp.dtype)
    b = _stat_4d(bias, c, 0.0, inp.dtype)
    if training:
        mean = _mean(inp, axis=(0, 2, 3), keepdims=True)
        centered = sub(inp, mean)
        var = _mean(mul(centered, centered), axis=(0, 2, 3), keepdims=True)
    else:
        assert running_var is not None and running_mean is not None
        mean = _stat_4d(running_mean, c, 0.0, inp.dtype)
        var = _stat_4d(running_var, c, 1.0, inp.dtype)
    scale = mul(w, maximum(var, float(eps)) ** -0.5)
    y = add(mul(inp, scale), sub(b, mul(mean, scale)))
    if training and running_mean is not None and running_var is not None:
        note_undumpable(_TRAINING_BN)
        n = inp.size // c
        unbiased = mul(var, n / (n - 1) if n > 1 else float("inf"))
        for target, new in ((running_mean, mean), (running_var, unbiased)):
            old = _stat_4d(target, c, 0.0, inp.dtype)
            _update_running(target, add(mul(old, momentum), mul(new, 1 - momentum)))
    return y
