"""`Tensor.__getitem__` / `__setitem__` with MegEngine's indexing rules.

Index forms: ints, slices, None, Ellipsis, integer tensors/lists/arrays (one or several,
broadcast together) and boolean masks. As MegEngine does, None adds axes first; indexing
with only ints and slices is a Subtensor, anything with an index tensor is an
IndexingMultiAxisVec (NumPy's result-axis rule), a boolean mask becomes the index tensors
of its true elements: known masks (eager, constants) here, masks the traced graph computes
through CondTake (value-dependent shapes: such graphs run on the NumPy interpreter).
`x[mask] = scalar` is a select (MegEngine's MaskedFill), so it compiles with any mask.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field

import numpy as np

from ..dispatch import active_recorder, apply
from ..ir import TensorType
from ..ops import get as get_op
from ..symbolic import SymInt
from ..tensor import Tensor


@dataclass
class _Plan:
    """x[index] as ops: new axes, then a Subtensor or an IndexingMultiAxisVec."""

    new_axes: tuple[int, ...] = ()
    rows: list = field(default_factory=list)          # subtensor rows
    slices: list = field(default_factory=list)        # (axis, start, stop, step)
    axes: list = field(default_factory=list)          # axes indexed by tensors
    tensors: list = field(default_factory=list)

    @property
    def vector(self) -> bool:
        return bool(self.tensors)


# -- parsing -------------------------------------------------------------------------------
def _as_tuple(index) -> tuple:
    if isinstance(index, tuple):
        return index
    if isinstance(index, list):
        if any(isinstance(i, float) for i in index):
            raise ValueError("float idx is vaild in subtensor")
        if all(isinstance(i, (int, np.integer, np.bool_)) for i in index):   # bools too,
            return (index,)                      # as MegEngine: [True, False] is one mask
        return tuple(index)
    return (index,)


def _is_mask(item) -> bool:
    return isinstance(item, (Tensor, np.ndarray)) and item.dtype == np.bool_


def _convert(item):
    """One index item as None, Ellipsis, slice, int, bool, or a Tensor."""
    if item is None or item is Ellipsis or isinstance(item, (Tensor, slice, bool, np.bool_)):
        return bool(item) if isinstance(item, np.bool_) else item
    if isinstance(item, (int, np.integer)):
        return item if isinstance(item, SymInt) else int(item)   # a traced dim stays one
    if isinstance(item, (list, tuple, np.ndarray)):
        arr = np.asarray(item)
        if arr.dtype == np.bool_:
            return Tensor(arr)
        if arr.size == 0:
            arr = arr.astype(np.int32)
        if arr.dtype.kind not in "iu":
            raise IndexError(f"index arrays must be integers or booleans; got {arr.dtype}")
        return Tensor(arr.astype(np.int32))
    raise IndexError(f"unsupported index {item!r} of type {type(item).__name__}: only "
                     "integers, slices, None, Ellipsis, integer or boolean tensors are valid")


def _expand_ellipsis(items: list, x: Tensor) -> list:
    ndim = x.ndim
    if any(i is Ellipsis for i in items):
        # a Network VarNode after CondTake has no static shape (MegEngine's wording)
        if any(_is_mask(i) and getattr(i, "shape_unknown", False) for i in items):
            raise IndexError("does not support bool index with unknown shape when using "
                             "Ellipsis.")
        if getattr(x, "shape_unknown", False):
            raise IndexError("does not support Ellipsis when tensor's ndim is unknown.")
    consumed = sum(i.ndim if _is_mask(i) else 1 for i in items
                   if i is not None and i is not Ellipsis and not isinstance(i, bool))
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor: tensor is {ndim}-dimensional, but "
                         f"{consumed} were indexed")
    if sum(i is Ellipsis for i in items) > 1:
        raise IndexError("only one ellipsis is allowed.")
    if Ellipsis not in [i for i in items if not isinstance(i, Tensor)]:
        return items
    at = next(k for k, i in enumerate(items) if i is Ellipsis)
    return items[:at] + [slice(None)] * (ndim - consumed) + items[at + 1:]


def _check_mask_shape(mask, shape: tuple[int, ...], first_axis: int) -> None:
    for j, (m, d) in enumerate(zip(mask.shape, shape)):
        if m != d:
            raise IndexError(f"boolean index did not match tensor along dimension "
                             f"{first_axis + j}; dimension is {d} but corresponding boolean "
                             f"dimension is {m}")


def _mask_indices(mask: Tensor, shape: tuple[int, ...], first_axis: int) -> list[Tensor]:
    """The index tensors of a known boolean mask's true elements."""
    _check_mask_shape(mask, shape, first_axis)
    return [Tensor(i.astype(np.int32)) for i in np.nonzero(_static_mask(mask))]


def _static_mask(mask: Tensor) -> np.ndarray | None:
    """The mask's value when it is known without running the graph (eager, or a constant
    of the trace); None for a mask the traced graph computes (or takes as an input)."""
    if mask._var is None:
        return mask.numpy()
    owner = mask._owner
    graph = getattr(owner, "graph", None)                      # recording
    if graph is None and getattr(owner, "entry", None) is not None:
        graph = owner.entry.full_graph                         # replaying
    if graph is not None and mask._var in graph.consts:
        return graph.consts[mask._var]
    return None


def _traced_mask(item) -> bool:
    return isinstance(item, Tensor) and item.dtype == np.bool_ and _static_mask(item) is None


def _merge_traced_masks(x: Tensor, index) -> tuple[Tensor, tuple, bool]:
    """MegEngine's way with a mask whose values only the graph knows: the axes it covers
    merge into one (a Reshape) and the mask becomes the flat indices of its true elements
    (CondTake of the flattened mask with itself), so the result's size is decided when
    the graph runs. Returns x (reshaped or not), the index items, whether it reshaped."""
    items = [_convert(i) for i in _as_tuple(index)]
    if not any(_traced_mask(i) for i in items):
        return x, tuple(items), False
    items = _expand_ellipsis(items, x)
    shape, axis, merged, out = list(x.shape), 0, False, []
    for item in items:
        if item is None or isinstance(item, bool):
            out.append(item)
            continue
        if _traced_mask(item):
            k = item.ndim
            _check_mask_shape(item, tuple(shape[axis:axis + k]), axis)
            flat = item if k == 1 else apply("reshape", item, shape=(-1,))
            if k != 1:
                size = functools.reduce(operator.mul, shape[axis:axis + k], 1)
                shape[axis:axis + k] = [size]
                merged = True
            out.append(apply("cond_take", flat, flat)[1])
        else:
            out.append(item)
        axis += 1
    if merged:
        x = apply("reshape", x, shape=tuple(shape))
    return x, tuple(out), merged


def _plan(x: Tensor, index) -> _Plan:
    items = [_convert(i) for i in _as_tuple(index)]
    items = _expand_ellipsis(items, x)
    entries, new_axes, axis = [], [], 0      # one entry per axis of x after new axes
    for item in items:
        if item is None or item is True:
            new_axes.append(len(entries))
            entries.append(slice(None))
        elif item is False:
            new_axes.append(len(entries))
            entries.append(slice(0, 0))
        elif _is_mask(item):
            entries += _mask_indices(item, x.shape[axis:axis + item.ndim], axis)
            axis += item.ndim
        else:
            entries.append(item)
            axis += 1
    entries += [slice(None)] * (x.ndim - axis)
    plan = _Plan(new_axes=tuple(new_axes))
    shape = list(x.shape)
    for a in new_axes:
        shape.insert(a, 1)
    vector = any(isinstance(e, Tensor) for e in entries)
    for a, e in enumerate(entries):
        if isinstance(e, slice):
            start, stop, step = (_int_or_none(v) for v in (e.start, e.stop, e.step))
            if step == 0:
                raise ValueError("slice step cannot be zero")
            if (start, stop, step) == (None, None, None):
                continue
            if vector:
                plan.slices.append((a, start, stop, step))
            else:
                plan.rows.append((a, start, stop, step, None))
        elif isinstance(e, Tensor):
            if e.dtype.kind not in "iu":
                raise IndexError(f"index tensors must be integers or booleans; got {e.dtype}")
            plan.axes.append(a)
            plan.tensors.append(e if e.dtype == np.int32 else e.astype("int32"))
        else:
            if not -shape[a] <= e < shape[a]:
                raise IndexError(f"index {e} is out of bounds for axis {a} with size "
                                 f"{shape[a]}")
            if vector:
                plan.axes.append(a)
                plan.tensors.append(Tensor(np.int32(e)))
            else:
                plan.rows.append((a, None, None, None, e))
    return plan


def _int_or_none(v):
    """A slice bound as an int; a traced dim (SymInt) stays one, so that the trace records
    how it was computed and a dump computes it at run time."""
    return v if v is None or isinstance(v, SymInt) else int(v)


# -- getitem / setitem -----------------------------------------------------------------------
def _with_new_axes(x: Tensor, plan: _Plan) -> Tensor:
    return apply("expand_dims", x, axis=plan.new_axes) if plan.new_axes else x


def getitem(x: Tensor, index) -> Tensor:
    if _traced_mask(index) and tuple(index.shape) == tuple(x.shape):
        return apply("cond_take", x, index)[0]       # MegEngine's one-CondTake form
    x, index, _ = _merge_traced_masks(x, index)
    plan = _plan(x, index)
    return _select(_with_new_axes(x, plan), plan)


def _selected_shape(x: Tensor, plan: _Plan) -> tuple[int, ...]:
    t = TensorType(x.shape, x.dtype.name)
    if plan.vector:
        types = [TensorType(i.shape, i.dtype.name) for i in plan.tensors]
        out = get_op("indexing_multi_axis_vec").infer_types(
            [t, *types], {"slices": tuple(plan.slices), "axes": tuple(plan.axes)})
    else:
        out = get_op("subtensor").infer_types([t], {"index": tuple(plan.rows)})
    return out[0].shape


def _select(x: Tensor, plan: _Plan) -> Tensor:
    if plan.vector:
        return apply("indexing_multi_axis_vec", x, *plan.tensors, slices=tuple(plan.slices),
                     axes=tuple(plan.axes))
    return apply("subtensor", x, index=tuple(plan.rows)) if plan.rows else x


def _value_for(x: Tensor, value, shape: tuple[int, ...], selected=None) -> Tensor:
    """The value as a Tensor of x's dtype, broadcast to the selected shape. In a trace,
    `selected()` gives x[index], whose traced shape the broadcast follows (as MegEngine
    broadcasts to inp[idx].shape), so a dump runs at any batch size."""
    if not isinstance(value, Tensor):
        value = Tensor(value, dtype=x.dtype, device=x.device)
    elif value.dtype != x.dtype:
        value = value.astype(x.dtype)
    vshape = value.shape
    mismatch = any(v != 1 and v != t for v, t in zip(vshape[::-1], shape[::-1])) or \
        any(d != 1 for d in vshape[:max(len(vshape) - len(shape), 0)])
    if mismatch:
        raise ValueError(f"cannot copy tensor with shape {tuple(vshape)} to subtensor with "
                         f"shape {tuple(shape)}")
    if len(vshape) > len(shape):
        value = apply("reshape", value, shape=vshape[len(vshape) - len(shape):])
    if value.shape != tuple(shape):
        value = apply("broadcast_to", value, shape=tuple(shape) if selected is None
                      else selected().shape)
    return value


def _masked_fill(x: Tensor, mask, value) -> Tensor | None:
    """x[mask] = scalar as a select (MegEngine's MaskedFill); None when it does not apply."""
    if not _is_mask(mask) or not isinstance(value, (int, float, bool, np.generic)):
        return None
    mask = mask if isinstance(mask, Tensor) else Tensor(mask)
    if mask.ndim > x.ndim or tuple(mask.shape) != tuple(x.shape[:mask.ndim]):
        return None
    if mask.ndim < x.ndim:
        mask = apply("reshape", mask, shape=tuple(mask.shape) + (1,) * (x.ndim - mask.ndim))
    fill = Tensor(np.array(value).astype(x.dtype), device=x.device)
    return apply("where", mask, fill, x) if x.size else x.detach()


def setitem(x: Tensor, index, value) -> Tensor:
    """The tensor x[index] = value makes (the caller rebinds x to it, as MegEngine's _reset)."""
    filled = _masked_fill(x, index, value)
    if filled is not None:
        return filled
    original = x
    x, index, merged = _merge_traced_masks(x, index)
    plan = _plan(x, index)
    base = _with_new_axes(x, plan)
    value = _value_for(base, value, _selected_shape(base, plan),
                       (lambda: _select(base, plan)) if active_recorder() else None)
    if plan.vector:
        out = apply("indexing_set_multi_axis_vec", base, value, *plan.tensors,
                    slices=tuple(plan.slices), axes=tuple(plan.axes))
    elif plan.rows:
        out = apply("set_subtensor", base, value, index=tuple(plan.rows))
    else:
        out = value
    if plan.new_axes or merged:
        out = apply("reshape", out, shape=tuple(original.shape))
    return out

