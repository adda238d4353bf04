"""MegEngine 1.13's group_norm, instance_norm, general_norm, local_response_norm and prelu
(`F.nn.*`, also at `F.*`).

group_norm/instance_norm are compositions of reductions and elementwise ops: MegEngine's
own dump rewrites its GroupNorm opr into the same Reshape/Reduce/Elemwise chain
(PassConvertToCompatible), so the written graph matches what real MegEngine writes.
general_norm and local_response_norm are the GeneralNorm and LRN oprs (megtrace/ops/norm13.py).
prelu is `max(x, 0) + y * min(x, 0)`, as MegEngine's Elemwise PRELU dumps.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ..core.tensor import amp as _amp
from ..dispatch import apply
from ..errors import ShapeError
from ..logger import get_logger
from ..tensor import Tensor
from ._convert import require_tensor
from .elemwise import add, div, maximum, minimum, mul, sqrt, sub
from .reduction import mean
from .tensor_ops import reshape, transpose

__all__ = ["group_norm", "instance_norm", "general_norm", "local_response_norm", "prelu"]


def _check_affine(affine: bool, weight, bias) -> None:
    if affine:
        assert weight is not None, "weight must be provided if affine is True"
        assert bias is not None, "bias must be provided if affine is True"


def _nchw(name: str, x: Tensor) -> None:
    if x.ndim != 4:     # MegEngine's GroupNorm kernel: assertion `data.ndim == 4' failed
        raise ShapeError(f"{name}: assertion `data.ndim == 4' failed: expects an NCHW input; "
                         f"got shape {tuple(x.shape)}")


def _grouped(name: str, inp: Tensor, groups: int, affine: bool, weight, bias,
             eps: float) -> Tensor:
    x = require_tensor(name, inp)
    _check_affine(affine, weight, bias)
    _nchw(name, x)
    n, c = x.shape[0], x.shape[1]
    if groups <= 0 or c % groups:
        raise ShapeError(f"{name}: {c} channels cannot be split into {groups} groups")
    g = reshape(x, (n, groups, -1))
    centered = sub(g, mean(g, axis=2, keepdims=True))
    var = mean(mul(centered, centered), axis=2, keepdims=True)
    y = reshape(div(centered, sqrt(add(var, float(eps)))), tuple(x.shape))
    if not affine:
        return y
    view = (1, -1, 1, 1)
    return add(mul(y, reshape(weight, view)), reshape(bias, view))


def group_norm(inp: Tensor, num_groups: int, affine: bool, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Normalize an NCHW input within `num_groups` channel groups per sample (biased
    variance), then scale/shift per channel when `affine`. Under amp autocast every input
    runs in the high precision (MegEngine's dtype-promote norm_rule for GroupNorm)."""
    if _amp._autocast:
        inp, weight, bias = (None if t is None else require_tensor("group_norm", t)
                             .astype(_amp._high_prec_dtype) for t in (inp, weight, bias))
    return _grouped("group_norm", inp, int(num_groups), affine, weight, bias, eps)


def instance_norm(inp: Tensor, affine: bool, weight: Optional[Tensor] = None,
                  bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """group_norm with one group per channel."""
    x = require_tensor("instance_norm", inp)
    _check_affine(affine, weight, bias)
    _nchw("instance_norm", x)
    return _grouped("instance_norm", x, x.shape[1], affine, weight, bias, eps)


def general_norm(inp: Tensor, normalized_axis, affine: bool = True,
                 weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                 eps: float = 1e-5) -> Tensor:
    """Normalize over `normalized_axis` (ascending; weight/bias have those axes' shape).
    Axes that are not one run are moved last around a transpose, as MegEngine does."""
    x = require_tensor("general_norm", inp)
    axes = list(normalized_axis) if isinstance(normalized_axis, Sequence) else [normalized_axis]
    assert len(axes) > 0, "normalization axis not specified"
    axes = [int(a) + x.ndim if int(a) < 0 else int(a) for a in axes]
    assert axes == sorted(axes), (
        f"The order of normalized_axis is incorrect, should be {sorted(axes)}, but got {axes}. "
        "Please specify the values of axis in the correct order in normalized_axis")
    assert axes[-1] < x.ndim, "the maximum axis in normalized_axis is greater than inp_shape.ndim"
    assert len(set(axes)) == len(axes), "there are duplicate axis in normalized_axis"
    order = None
    if axes[-1] - axes[0] != len(axes) - 1:
        get_logger().warning("normalized_axis is discontinuous, and performance may be poor")
        order = [a for a in range(x.ndim) if a not in axes] + axes
        x = transpose(x, order)
        axes = list(range(x.ndim - len(axes), x.ndim))
    shape = tuple(x.shape[a] for a in axes)
    if affine:
        _check_affine(affine, weight, bias)
        w, b = require_tensor("general_norm", weight), require_tensor("general_norm", bias)
    else:
        w, b = Tensor(np.ones(shape, x.dtype)), Tensor(np.zeros(shape, x.dtype))
    y = apply("general_norm", x, w, b, eps=float(eps), axis_start=axes[0],
              axis_end=axes[-1] + 1)
    if order is not None:
        y = transpose(y, [order.index(i) for i in range(x.ndim)])
    return y


def local_response_norm(inp: Tensor, kernel_size: int = 5, k: float = 2.0, alpha: float = 1e-4,
                        beta: float = 0.75) -> Tensor:
    """x / (k + alpha * sum of x^2 over the kernel_size channels around it)^beta (NCHW)."""
    return apply("lrn", require_tensor("local_response_norm", inp), n=int(kernel_size),
                 k=float(k), alpha=float(alpha), beta=float(beta))


def prelu(x: Tensor, y) -> Tensor:
    """Element-wise `max(x, 0) + y * min(x, 0)`."""
    x = require_tensor("prelu", x)
    return add(maximum(x, 0.0), mul(y, minimum(x, 0.0)))
