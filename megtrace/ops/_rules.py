"""Shape/dtype rules shared by several operator families."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for axis, dims in enumerate(zip(*padded)):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            shown = " and ".join(str(tuple(s)) for s in shapes)
            raise ShapeError(f"{op}: cannot broadcast shapes {shown}; axis {axis} is "
                             f"{' vs '.join(map(str, dims))}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def same_dtype(op: str, *types: TensorType) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise DTypeError(f"{op}: operand dtypes differ; got {', '.join(str(t) for t in types)}")
    return dtypes.pop()


def norm_axis(op: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for a {ndim}-d tensor")
    return axis % ndim


def pair(name: str, value) -> tuple[int, int]:
    """MegEngine accepts an int or a pair for kernel/stride/padding/dilation."""
    if type(value) is tuple and len(value) == 2 and type(value[0]) is int \
            and type(value[1]) is int:
        return value          # already normalized (a module's stored stride, padding)
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name}: expected an int or a pair of ints, got {value!r}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


def sort_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """MegEngine's sorting order along the last axis (megdnn's TopK and Argsort): ascending
    is stable, descending is the ascending order reversed, so equal elements come last
    index first."""
    order = np.argsort(x, axis=-1, kind="stable")
    return order[..., ::-1] if descending else order


def lower_sorted(L, x, k: int, descending: bool):
    """Relax top-k in `sort_order`'s order: TVM's topk keeps equal elements in index
    order, so the descending case picks on the reversed row, maps the indices back and
    gathers the values they name (a (values, indices) pair of expressions)."""
    R = L.R
    if not descending:
        return R.topk(x, k=k, axis=-1, ret_type="both", largest=False, dtype="int32")
    n = L.types[0].shape[-1]
    picked = R.topk(R.flip(x, axis=-1), k=k, axis=-1, ret_type="indices", largest=True,
                    dtype="int32")
    index = L.normalize(R.subtract(L.const(n - 1, "int32"), picked))
    return R.gather_elements(x, index, axis=-1), index
