"""Shape functions with MegEngine's names (`F.reshape`, `F.flatten`, `F.concat`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import device as _device
from .. import dtype as _dt
from ..dispatch import active_recorder, apply
from ..ops.quantized import spec as quantized_spec
from ..symbolic import SymInt, has_symbols
from ..tensor import Tensor
from ._convert import binary_operands, cast, require_tensor

__all__ = ["reshape", "flatten", "concat", "astype", "expand_dims", "squeeze", "transpose",
           "broadcast_to", "split", "stack", "where", "full", "zeros", "ones", "zeros_like",
           "ones_like", "full_like", "arange", "linspace"]


def _dims(shape) -> tuple[int, ...]:
    """A shape argument as ints, keeping traced dims (SymInt) so the trace records how
    they were computed (megtrace/symbolic.py)."""
    if isinstance(shape, Tensor):
        from ..tensor import shape_of_tensor
        return shape_of_tensor(shape)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return tuple(d if isinstance(d, SymInt) else int(d) for d in shape)


def reshape(inp: Tensor, target_shape: Sequence[int] | int) -> Tensor:
    """Reshape to `target_shape`; one entry may be -1."""
    return apply("reshape", require_tensor("reshape", inp), shape=_dims(target_shape))


def flatten(inp: Tensor, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """Merge axes `start_axis..end_axis` into one."""
    return apply("flatten", require_tensor("flatten", inp), start_axis=int(start_axis),
                 end_axis=int(end_axis))


def concat(inps: Sequence[Tensor], axis: int = 0, device=None) -> Tensor:
    """Join tensors along an existing axis (the result lives on `device`, or on the
    inputs' common device)."""
    tensors = [require_tensor("concat", t) for t in inps]
    if len(tensors) == 1:                       # MegEngine: a copy of the one input
        return _on(apply("copy", tensors[0]), device)
    if any(t.ndim == 0 for t in tensors):       # MegEngine: a scalar joins as one element
        tensors = [reshape(t, (1,)) if t.ndim == 0 else t for t in tensors]
    dtypes = {_dt.name_of(t.dtype) for t in tensors}
    if len(dtypes) > 1:                         # MegEngine promotes mixed inputs first
        common = _dt.promote(*sorted(dtypes))
        tensors = [cast(t, common) for t in tensors]
    return _on(apply("concat", *tensors, axis=int(axis)), _common_device("concat", tensors,
                                                                          device))


def _common_device(name: str, tensors: Sequence[Tensor], device) -> str | None:
    """The device of a joined result: `device`, else the one device the inputs share
    (the default "xpux" goes along with any)."""
    if device is not None:
        return str(device)
    default = str(_device.as_device("xpux"))
    named = {str(_device.as_device(t.device)) for t in tensors} - {default}
    if len(named) > 1:
        raise ValueError(f"{name}: inputs have different devices {sorted(named)}; pass "
                         "device= to choose one")
    return named.pop() if named else None


def _on(t: Tensor, device: str | None) -> Tensor:
    """`t`, placed on `device` when one is given (values live in host memory)."""
    if device is not None:
        t._device = _device.as_device(device)
    return t


def astype(x: Tensor, dtype) -> Tensor:
    """Convert to `dtype` (MegEngine's `Tensor.astype`; a TypeCvt operator). To or from
    a quantized dtype (`megtrace.core.tensor.dtype.qint8(scale)`, ...) it quantizes or
    dequantizes as MegEngine's TypeCvt does."""
    x = require_tensor("astype", x)
    if _dt._quantized(np.dtype(dtype) if not isinstance(dtype, str) else None) is not None \
            or _dt._quantized(x.dtype) is not None:
        return quantized_astype(x, np.dtype(dtype))
    return cast(x, _dt.canonical(dtype))


def quantized_astype(x: Tensor, dtype: np.dtype) -> Tensor:
    """TypeCvt where `x` or `dtype` is quantized (the quantized_astype op: eager, traced
    and dumped; no gradient flows through a quantized value, as in MegEngine)."""
    return apply("quantized_astype", x, dtype=quantized_spec(dtype))


def _axis_tuple(axis) -> tuple[int, ...]:
    return tuple(int(a) for a in axis) if isinstance(axis, (tuple, list)) else (int(axis),)


def expand_dims(inp: Tensor, axis) -> Tensor:
    """Insert size-1 axes at `axis` (an int or a sequence, positions in the result)."""
    return apply("expand_dims", require_tensor("expand_dims", inp), axis=_axis_tuple(axis))


def squeeze(inp: Tensor, axis=None) -> Tensor:
    """Remove size-1 axes (all of them when `axis` is None)."""
    inp = require_tensor("squeeze", inp)
    axes = tuple(i for i, d in enumerate(inp.shape) if d == 1) if axis is None else \
        _axis_tuple(axis)
    return apply("squeeze", inp, axis=axes)


def transpose(inp: Tensor, pattern) -> Tensor:
    """Permute axes: output axis i is input axis pattern[i]."""
    return apply("transpose", require_tensor("transpose", inp),
                 pattern=tuple(int(p) for p in pattern))


def broadcast_to(inp: Tensor, shape) -> Tensor:
    """Broadcast to `shape`; a None entry keeps the input's size on that (right-aligned)
    axis. Entries may be ints or scalar Tensors, or `shape` one 1-d Tensor."""
    x = require_tensor("broadcast_to", inp)
    if isinstance(shape, Tensor):
        shape = [int(v) for v in np.atleast_1d(shape.numpy())]
    elif isinstance(shape, (int, np.integer)):
        shape = [int(shape)]
    shape = list(shape)
    lead = len(shape) - x.ndim
    for i, s in enumerate(shape):
        if s is None:
            if i < lead:
                raise ValueError("size connot be `None` for new axis")
            shape[i] = x.shape[i - lead]
        else:
            shape[i] = s if isinstance(s, SymInt) else int(s.item() if isinstance(s, Tensor) else s)
            if shape[i] < 0:
                raise ValueError(f"expect shape[{i}] >= 0 or use `None` to auto infer, got "
                                 f"{shape[i]}")
    return apply("broadcast_to", x, shape=tuple(shape))


def split(inp: Tensor, nsplits_or_sections, axis: int = 0) -> tuple[Tensor, ...]:
    """`nsplits_or_sections` is a number of parts (sizes differ by at most one, the larger
    first) or the increasing split points. A tuple, as MegEngine's split_cpp returns."""
    from .indexing import getitem
    x = require_tensor("split", inp)
    ax = axis % x.ndim
    size = x.shape[ax]
    if isinstance(nsplits_or_sections, (int, np.integer)):
        n = int(nsplits_or_sections)
        if n <= 0:
            raise ValueError("Number sections must be larger than 0")
        if n > size:
            raise ValueError(f"The size {size} at dim {ax} cannot be split into {n} sections")
        small, extra = divmod(size, n)
        points = list(np.cumsum([small + 1] * extra + [small] * (n - extra))[:-1])
    else:
        points = [int(p) for p in nsplits_or_sections]
        if any(a > b for a, b in zip([0] + points, points + [size])):
            raise ValueError(f"Invalid nsplits_or_secions: {nsplits_or_sections}")
    bounds = [0] + [int(p) for p in points] + [size]
    lead = (slice(None),) * ax
    return tuple(getitem(x, lead + (slice(a, b),)) for a, b in zip(bounds[:-1], bounds[1:]))


def stack(inps, axis: int = 0, device=None) -> Tensor:
    """Join tensors of one shape along a new axis."""
    tensors = [require_tensor("stack", t) for t in inps]
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    ax = axis % (tensors[0].ndim + 1)
    if len(tensors) == 1:
        out = expand_dims(tensors[0], ax)
        return out if device is None else _on(apply("copy", out), device)
    return concat([expand_dims(t, ax) for t in tensors], axis=ax, device=device)


def where(mask: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """x where mask is True, else y (broadcasting; x and y promote to one dtype). As in
    MegEngine, all three must be Tensors and the mask bool."""
    if not isinstance(x, Tensor):
        raise TypeError("input x must be a tensor")
    if not isinstance(y, Tensor):
        raise TypeError("input y must be a tensor")
    if not isinstance(mask, Tensor):
        raise TypeError("mask must be a tensor")
    if mask.dtype != np.bool_:
        raise ValueError("mask must be bool")
    a, b = binary_operands(x, y)
    return apply("where", mask, a, b)


# -- creation: constants (inside a trace they are constants of the graph) -----------------
def _shape(shape) -> tuple[int, ...]:
    """A shape given as an int, a sequence of ints or scalar Tensors, or a 1-d Tensor."""
    if isinstance(shape, Tensor):
        return tuple(int(d) for d in np.atleast_1d(shape.numpy()))
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d.item() if isinstance(d, Tensor) else d) for d in shape)


def _scalar(value):
    return value.item() if isinstance(value, Tensor) else value


def _filled(shape, value, dtype, device) -> Tensor:
    """A constant; in a trace, a shape with traced dims makes it Broadcast(value, shape),
    as MegEngine writes it, so the dumped model follows the input's size."""
    if isinstance(shape, (tuple, list)) and has_symbols(shape) and active_recorder():
        return broadcast_to(Tensor(np.array(value), dtype=dtype, device=device), _dims(shape))
    return Tensor(np.full(_shape(shape), value), dtype=dtype, device=device)


def full(shape, value, dtype=None, device=None) -> Tensor:
    """A tensor of `shape` filled with `value`; the dtype defaults to `Tensor(value)`'s."""
    value = _scalar(value)
    if dtype is None:
        dtype = Tensor(value).dtype
    return _filled(shape, value, dtype, device)


def zeros(shape, dtype="float32", device=None) -> Tensor:
    return _filled(shape, 0, dtype, device)


def ones(shape, dtype="float32", device=None) -> Tensor:
    return _filled(shape, 1, dtype, device)


def zeros_like(inp: Tensor) -> Tensor:
    return full_like(inp, 0)


def ones_like(inp: Tensor) -> Tensor:
    return full_like(inp, 1)


def full_like(inp: Tensor, value) -> Tensor:
    """A tensor with `inp`'s shape, dtype and device, filled with `value`."""
    inp = require_tensor("full_like", inp)
    return _filled(inp.shape, _scalar(value), inp.dtype, inp.device)


def arange(start=0, stop=None, step=1, dtype="float32", device=None) -> Tensor:
    """[start, stop) by `step`, computed as MegEngine does: ceil((stop - start) / step)
    float32 points of a linspace, then cast to `dtype`."""
    start, stop, step = _scalar(start), _scalar(stop), _scalar(step)
    if stop is None:
        start, stop = 0, start
    if isinstance(stop, SymInt) and active_recorder() and _plain_int(start) and \
            _plain_int(step) and step != 0 and stop != start:
        return _traced_arange(start, stop, step, dtype, device)
    start, step = np.float32(start), np.float32(step)
    num = max(int(np.ceil((np.float32(stop) - start) / step)), 0)
    return Tensor(_linspace32(start, start + step * np.float32(num - 1), num), dtype=dtype,
                  device=device)


def _plain_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, SymInt))


def _traced_arange(start: int, stop: SymInt, step: int, dtype, device) -> Tensor:
    """arange up to a traced dim (`F.arange(x.shape[0])`) follows the input's size in a
    dump: start + step * (cumsum(ones(num)) - 1), ones broadcast to the run-time count
    num = ceil((stop - start) / step) (exact in float32 below 2**24, as MegEngine's
    Linspace)."""
    from .math import cumsum
    num = -((start - stop) // step)
    ones = broadcast_to(Tensor(np.array(1, np.float32), device=device), (num,))
    points = (cumsum(ones, axis=0) - 1.0) * float(step) + float(start)
    return points if np.dtype(dtype) == np.float32 else points.astype(dtype)


def linspace(start, stop, num, dtype="float32", device=None) -> Tensor:
    """`num` evenly spaced float32 points from `start` to `stop` (both included), cast to
    `dtype`."""
    start, stop, num = _scalar(start), _scalar(stop), _scalar(num)
    if isinstance(num, SymInt) and active_recorder() and num >= 0:
        # a length read from a traced shape: computed at run time in a dump (Linspace)
        points = apply("linspace", start=float(start), stop=float(stop), shape=(num,))
        return points if np.dtype(dtype) == np.float32 else points.astype(dtype)
    return Tensor(_linspace32(start, stop, int(num)), dtype=dtype, device=device)


def _linspace32(start, stop, num: int) -> np.ndarray:
    """MegEngine's Linspace kernel: float32 ends, start + i * step computed in double."""
    start, stop = float(np.float32(start)), float(np.float32(stop))
    step = (stop - start) / max(num - 1, 1)
    return (start + np.arange(num, dtype=np.float64) * step).astype(np.float32)
