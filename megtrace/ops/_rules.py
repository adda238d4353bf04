"""Shape/dtype rules shared by several operator families."""
from __future__ import annotations

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
