"""Math functions with MegEngine's names: argmax/argmin, topk, cumsum, clip, logsumexp,
and the comparisons and logical operators."""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from ..dispatch import apply
from ..tensor import Tensor
from ._convert import binary_operands, cast, require_tensor
from .reduction import max as _max, min as _min, sum as _sum
from .tensor_ops import expand_dims, reshape, squeeze
from .elemwise import add, exp, log, maximum, minimum, sub
from .elemwise_extra import isinf, isnan

__all__ = ["argmax", "argmin", "topk", "cumsum", "clip", "logsumexp", "equal", "not_equal",
           "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
           "logical_xor", "logical_not"]


def _arg(mode: str, inp: Tensor, axis, keepdims: bool) -> Tensor:
    x = require_tensor(f"arg{mode}", inp)
    if axis is None:
        assert not keepdims, "can not set axis=None and keepdims=True"
        return apply("arg_reduce", reshape(x, (-1,)), mode=mode, axis=0, keepdims=False)
    if isinstance(axis, (list, tuple)):
        # MegEngine 1.13 reduces the axes one after another, the last first: each later
        # step takes the arg of the previous step's indices
        for a in sorted({int(a) % x.ndim for a in axis}, reverse=True):
            x = apply("arg_reduce", x, mode=mode, axis=a, keepdims=bool(keepdims))
        return x
    return apply("arg_reduce", x, mode=mode, axis=int(axis), keepdims=bool(keepdims))


def argmax(inp: Tensor, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index (int32) of the largest element along `axis` (of the flattened input if None)."""
    return _arg("max", inp, axis, keepdims)


def argmin(inp: Tensor, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index (int32) of the smallest element along `axis` (of the flattened input if None)."""
    return _arg("min", inp, axis, keepdims)


def topk(inp: Tensor, k: int, descending: bool = True, kth_only: bool = False,
         no_sort: bool = False):
    """The k largest (smallest unless `descending`) elements along the last axis of a 1-d
    or 2-d tensor and their int32 indices; MegEngine 1.13 defaults to descending, and a k
    beyond the axis length gives the whole axis. `kth_only` gives the k-th value and the
    index of its first occurrence; `no_sort` allows any order (here they come sorted)."""
    x = require_tensor("topk", inp)
    k = min(int(k), x.shape[-1]) if x.ndim else int(k)
    rows = expand_dims(x, 0) if x.ndim == 1 else x
    if kth_only:
        kth = apply("kth_value", rows, k=k, descending=bool(descending))
        if x.ndim == 1:
            return squeeze(kth, 0), argmax(cast(equal(kth, x), "int8"))
        return kth, argmax(cast(equal(expand_dims(kth, 1), x), "int8"), 1)
    values, indices = apply("topk", rows, k=k, descending=bool(descending))
    if x.ndim == 1:
        return squeeze(values, 0), squeeze(indices, 0)
    return values, indices


def cumsum(inp: Tensor, axis: int) -> Tensor:
    """Inclusive cumulative sum along `axis`."""
    return apply("cumsum", require_tensor("cumsum", inp), axis=int(axis))


def clip(x: Tensor, lower=None, upper=None) -> Tensor:
    """Clamp into [lower, upper]; either bound may be None, a number or a Tensor. As in
    MegEngine the result is minimum(maximum(x, lower), upper), so lower > upper gives
    upper everywhere."""
    assert lower is not None or upper is not None, \
        "At least one of 'lower' or 'upper' must not be None"
    if not isinstance(x, Tensor):
        x = require_tensor("clip", x)
    plain = _PLAIN      # the common bounds (ints, floats, None) without a call each
    if x.dtype.kind == "f" and (type(lower) in plain or _number(lower)) and \
            (type(upper) in plain or _number(upper)) and \
            (lower is None or upper is None or lower <= upper):
        return apply("clip", x, lower=None if lower is None else float(lower),
                     upper=None if upper is None else float(upper))
    out = x if lower is None else maximum(x, lower)
    return out if upper is None else minimum(out, upper)


_PLAIN = frozenset((int, float, type(None)))


def _number(value) -> bool:
    return type(value) in _PLAIN or (isinstance(value, (int, float, np.integer, np.floating))
                             and not isinstance(value, bool))


def logsumexp(inp: Tensor, axis: Union[int, Sequence[int]], keepdims: bool = False) -> Tensor:
    """log(sum(exp(inp), axis)), computed stably around the maximum."""
    m = _max(inp, axis=axis, keepdims=True)
    out = add(log(_sum(exp(sub(inp, m)), axis=axis, keepdims=True)), m)
    if not keepdims:
        from .tensor_ops import squeeze
        out = squeeze(out, axis)
    return out


def _compare(name: str):
    def fn(x, y) -> Tensor:
        a, b = binary_operands(x, y)
        return apply(name, a, b)
    return fn


less, less_equal, greater, greater_equal, equal = (
    _compare(n) for n in ("lt", "le", "gt", "ge", "eq"))


def not_equal(x, y) -> Tensor:
    return logical_not(equal(x, y))


def _logical(name: str):
    def fn(x, y) -> Tensor:
        return apply(name, cast(require_tensor(name, x), "bool"),
                     cast(require_tensor(name, y), "bool"))
    fn.__name__ = name
    return fn


logical_and, logical_or, logical_xor = (_logical(n) for n in
                                        ("logical_and", "logical_or", "logical_xor"))


def logical_not(x) -> Tensor:
    return apply("logical_not", cast(require_tensor("logical_not", x), "bool"))


def _check_non_finite(inps, scale: float = 1.0) -> Tensor:
    """Whether any of `inps` holds an inf or NaN: an int32 scalar, 1 or 0 (MegEngine's
    CheckNonFinite). Each input is multiplied by `scale` in place, as MegEngine's
    operator does (GradScaler unscales gradients with it)."""
    inps = [inps] if isinstance(inps, Tensor) else list(inps)
    flag = None
    for t in inps:
        t = require_tensor("_check_non_finite", t)
        bad = _max(cast(logical_or(isinf(t), isnan(t)), "int32"))
        flag = bad if flag is None else maximum(flag, bad)
    # all products first: one tensor passed twice is scaled once, as MegEngine's
    # operator computes every output from the inputs it was given
    for t, scaled in [(t, t * scale) for t in inps]:
        t._reset(scaled)
    return flag if flag is not None else Tensor(np.int32(0))


# MegEngine's functional.math holds max, min and sum too. They are attributes only (PEP 562),
# never globals of this module, whose code means Python's builtins by those names.
_REDUCTIONS = {"max": _max, "min": _min, "sum": _sum}


def __getattr__(name: str):
    if name in _REDUCTIONS:
        return _REDUCTIONS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
