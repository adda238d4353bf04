"""MegEngine's sort/argsort, var/std, norm/normalize, dot and matinv, composed the way
MegEngine 1.13 composes them."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple, Union

from ..dispatch import apply
from ..tensor import Tensor
from ._convert import require_tensor
from .elemwise import abs as _abs, div, pow as _pow, sub
from .math import clip, not_equal
from .reduction import max as _max, mean, min as _min, sum as _sum

__all__ = ["sort", "argsort", "var", "std", "norm", "normalize", "dot", "matinv", "svd"]

Axis = Optional[Union[int, Sequence[int]]]


def _sorted(name: str, inp, descending: bool) -> Tuple[Tensor, Tensor]:
    x = require_tensor(name, inp)
    assert x.ndim <= 2, "Input should be 1d or 2d"
    if x.ndim == 2:
        return apply("argsort", x, descending=bool(descending))
    values, indices = apply("argsort", x.reshape(1, -1), descending=bool(descending))
    return values[0], indices[0]


def sort(inp: Tensor, descending: bool = False) -> Tuple[Tensor, Tensor]:
    """Sorted values of a 1-d or 2-d tensor (along its last axis) and their int32 indices."""
    return _sorted("sort", inp, descending)


def argsort(inp: Tensor, descending: bool = False) -> Tensor:
    """int32 indices that sort a 1-d or 2-d tensor along its last axis."""
    return _sorted("argsort", inp, descending)[1]


def var(inp: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Population variance: mean((inp - mean(inp))**2) over `axis`."""
    x = require_tensor("var", inp)
    m = mean(x, axis=axis, keepdims=axis is not None)
    return mean(_pow(sub(x, m), 2), axis=axis, keepdims=keepdims)


def std(inp: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Population standard deviation: var(inp) ** 0.5."""
    return _pow(var(inp, axis=axis, keepdims=keepdims), 0.5)


def norm(inp: Tensor, ord: float = None, axis: int = None, keepdims=False) -> Tensor:
    """Vector p-norm along `axis` (`ord` 0 counts non-zeros; +-inf ignore `axis` and take
    the largest/smallest magnitude of the whole tensor, as MegEngine 1.13 does)."""
    x = require_tensor("norm", inp)
    if axis is None and x.ndim != 1:
        raise TypeError("axis is required unless input is a vector")
    if ord is None:
        ord = 2
    if ord == 0:
        return _sum(not_equal(x, 0), axis=axis, keepdims=keepdims)
    if ord == math.inf:
        return _max(_abs(x))
    if ord == -math.inf:
        return _min(_abs(x))
    return _pow(_sum(_pow(_abs(x), ord), axis=axis, keepdims=keepdims), 1.0 / ord)


def normalize(inp: Tensor, ord: float = None, axis: int = None, eps: float = 1e-12) -> Tensor:
    """inp / max(norm(inp, ord, axis), eps)."""
    if axis is None:
        return div(inp, clip(norm(inp, ord, axis), lower=eps))
    return div(inp, clip(norm(inp, ord, axis, keepdims=True), lower=eps))


def dot(inp1: Tensor, inp2: Tensor) -> Tensor:
    """Inner product of two vectors (or scalars); a scalar tensor."""
    a, b = require_tensor("dot", inp1), require_tensor("dot", inp2)
    assert a.ndim <= 1 and b.ndim <= 1, "Input tensors for dot must be 1-dimensional or scalar"
    return apply("dot", a, b)


def matinv(inp: Tensor) -> Tensor:
    """Inverse of each square matrix in the last two axes."""
    return apply("matinv", require_tensor("matinv", inp))


def svd(inp: Tensor, full_matrices=False, compute_uv=True):
    """(U, S, Vh) of each matrix in the last two axes, singular values descending."""
    if not compute_uv:
        raise NotImplementedError("svd: compute_uv=False is not supported (MegEngine 1.13's "
                                  "F.svd fails on it as well)")
    return apply("svd", require_tensor("svd", inp), full_matrices=bool(full_matrices))
