"""Indexing with tensors and writing into a tensor (MegEngine's IndexingMultiAxisVec,
IndexingSetMultiAxisVec and SetSubtensor).

- `indexing_multi_axis_vec(x, *idx, slices, axes)`: x sliced by the static `slices` rows
  (axis, start, stop, step), then indexed on `axes` (ascending) by the integer tensors
  `idx`, broadcast together. The broadcast index dimensions replace the indexed axes where
  these are adjacent, and lead the result otherwise (NumPy's rule, which MegEngine
  follows).
- `indexing_set_multi_axis_vec(x, v, *idx, slices, axes)`: x with those elements replaced
  by v (v already has the indexed result's shape).
- `set_subtensor(x, v, index)`: x with x[index] replaced by v; `index` rows as `subtensor`.

In .mge files MegEngine lists index items in descending axis order, the index inputs in
the same order; megtrace writes them so and reads any order.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from ._rules import broadcast_shapes, norm_axis
from .grad_tensor import set_subtensor_vjp
from .registry import MgeComposite, MgeOpr, OpDef, register
from .shape import _index_tuple, check_bound_inputs, index_inputs, relax_slice, subtensor_bounds

INDEXING = MgeOpr("IndexingMultiAxisVec", "IndexDescMaskDump")
INDEXING_SET = MgeOpr("IndexingSetMultiAxisVec", "IndexDescMaskDump")
SET_SUBTENSOR = MgeOpr("SetSubtensor", "IndexDescMaskDump")
_INDEX_DTYPES = ("int32", "int16", "int8", "uint8")


# -- shapes -------------------------------------------------------------------------------
def _slice_key(ndim: int, slices) -> tuple:
    key: list = [slice(None)] * ndim
    for axis, start, stop, step in slices:
        key[axis] = slice(start, stop, step)
    return tuple(key)


def _sliced_shape(shape: tuple[int, ...], slices) -> tuple[int, ...]:
    out = list(shape)
    for axis, start, stop, step in slices:
        if step == 0:
            raise ShapeError(f"indexing: slice step cannot be zero (axis {axis})")
        out[axis] = len(range(*slice(start, stop, step).indices(shape[axis])))
    return tuple(out)


def _index_position(axes) -> int:
    """Where the index dimensions go among the other axes: in place of adjacent indexed
    axes, else first."""
    adjacent = list(axes) == list(range(axes[0], axes[0] + len(axes)))
    return axes[0] if adjacent else 0


def _result_shape(shape: tuple[int, ...], axes, index_shape) -> tuple[int, ...]:
    rest = [d for i, d in enumerate(shape) if i not in axes]
    at = _index_position(axes)
    return tuple(rest[:at]) + tuple(index_shape) + tuple(rest[at:])


def _check(name: str, x, idx, slices, axes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if not axes or len(axes) != len(idx):
        given = len(idx) + (2 if name.startswith("indexing_set") else 1)
        raise TypeError(f"{name}: expected {given - len(idx) + len(axes)} tensor input(s), "
                        f"got {given} (one index tensor per axis in axes={axes})")
    if list(axes) != sorted(set(axes)):
        raise ShapeError(f"{name}: index axes {axes} must be ascending and distinct")
    for axis in list(axes) + [s[0] for s in slices]:
        norm_axis(name, axis, x.ndim)
        if axis < 0:
            raise ShapeError(f"{name}: axes must be given non-negative; got {axis}")
    for t in idx:
        if t.dtype not in _INDEX_DTYPES:
            raise DTypeError(f"{name}: index tensors must be integers; got {t}")
    sliced = _sliced_shape(x.shape, slices)
    index_shape = broadcast_shapes(name, *[t.shape for t in idx])
    for axis in axes:
        if sliced[axis] == 0 and int(np.prod(index_shape, dtype=np.int64)) > 0:
            raise ShapeError(f"{name}: cannot index axis {axis} of size 0")
    return sliced, _result_shape(sliced, axes, index_shape)


def _slice_bounds(p) -> list:
    """The given slice bounds (start, stop, step, slice by slice): what run-time bound
    inputs after the index tensors stand for (OpDef.int_inputs)."""
    return [v for row in p["slices"] for v in row[1:] if v is not None]


def _split(name: str, rest, slices, axes) -> tuple[tuple, tuple]:
    """The inputs after x (and v): (index tensors, run-time slice bounds)."""
    idx, bounds = tuple(rest[:len(axes)]), tuple(rest[len(axes):])
    want = len(_slice_bounds({"slices": slices}))
    if bounds and (len(bounds) != want or
                   any(b.dtype != "int32" or b.ndim != 0 for b in bounds)):
        raise ShapeError(f"{name}: run-time bounds must be {want} int32 scalars for slices "
                         f"{slices}; got {list(bounds)}")
    return idx, bounds


def _get_infer(x, *rest, slices, axes):
    idx, _ = _split("indexing_multi_axis_vec", rest, slices, axes)
    return TensorType(_check("indexing_multi_axis_vec", x, idx, slices, axes)[1], x.dtype)


def _set_infer(x, v, *rest, slices, axes):
    idx, _ = _split("indexing_set_multi_axis_vec", rest, slices, axes)
    _, shape = _check("indexing_set_multi_axis_vec", x, idx, slices, axes)
    if v.dtype != x.dtype:
        raise DTypeError(f"indexing_set_multi_axis_vec: value {v} must have the dtype of {x}")
    if v.shape != shape:
        raise ShapeError(f"indexing_set_multi_axis_vec: value {v} must have the indexed "
                         f"shape {shape}")
    return x


# -- NumPy --------------------------------------------------------------------------------
def _vector_key(ndim: int, idx, axes) -> tuple:
    key: list = [slice(None)] * ndim
    for axis, i in zip(axes, idx):
        key[axis] = i.astype(np.int64)
    return tuple(key)


def _get_eager(x, *rest, slices, axes):
    idx = rest[:len(axes)]
    sub = x[_slice_key(x.ndim, slices)]
    return np.array(sub[_vector_key(x.ndim, idx, axes)])


def _set_eager(x, v, *rest, slices, axes):
    idx = rest[:len(axes)]
    out = np.array(x)
    view = out[_slice_key(x.ndim, slices)]     # basic slicing: a view into `out`
    view[_vector_key(x.ndim, idx, axes)] = v
    return out


# -- Relax ----------------------------------------------------------------------------------
def _gather(L, x, x_type: TensorType, idx, idx_types, slices, axes):
    """x[slices][idx on axes] as permute + flat take (the index tensors broadcast)."""
    R = L.R
    shape = _sliced_shape(x_type.shape, slices)
    if slices:
        begin, end, strides = [], [], []
        for axis, start, stop, step in slices:
            b, e, s = relax_slice(slice(start, stop, step), x_type.shape[axis])
            begin.append(b), end.append(e), strides.append(s)
        x = L.normalize(R.strided_slice(x, [s[0] for s in slices], begin, end, strides))
    ndim = len(shape)
    rest_axes = [a for a in range(ndim) if a not in axes]
    perm = list(axes) + rest_axes
    if perm != list(range(ndim)):
        x = L.normalize(R.permute_dims(x, perm))
    index_shape = broadcast_shapes("indexing", *[t.shape for t in idx_types])
    flat = None
    for axis, i, t in zip(axes, idx, idx_types):
        if t.dtype != "int32":
            i = L.normalize(R.astype(i, "int32"))
        if tuple(t.shape) != tuple(index_shape):
            i = L.normalize(R.broadcast_to(i, index_shape))
        size = L.const(shape[axis], "int32")
        i = L.normalize(R.where(R.less(i, L.const(0, "int32")), R.add(i, size), i))
        flat = i if flat is None else L.normalize(R.add(R.multiply(flat, size), i))
    rest = [shape[a] for a in rest_axes]
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    x = L.normalize(R.reshape(x, [count] + rest))
    out = L.normalize(R.take(x, flat, axis=0, mode="clip"))   # index_shape + rest (no
    # out-of-range reads in compiled code: eager and the NumPy reference raise IndexError)
    k = len(index_shape)
    at = _index_position(axes)
    if at:          # adjacent indexed axes after others: the index dims go there
        order = list(range(k, k + at)) + list(range(k)) + list(range(k + at, k + len(rest)))
        out = L.normalize(R.permute_dims(out, order))
    return out


def _get_lower(L, x, *rest, slices, axes):
    n = len(axes)
    return _gather(L, x, L.types[0], rest[:n], L.types[1:1 + n], slices, axes)


def _scatter(L, x, x_type: TensorType, positions, v):
    """x with the flat `positions` set to the values of v (same element count)."""
    R = L.R
    flat = L.normalize(R.reshape(x, [x_type.size]))
    pos = L.normalize(R.reshape(positions, [-1]))
    vals = L.normalize(R.reshape(v, [-1]))
    out = L.normalize(R.scatter_elements(flat, pos, vals, axis=0))
    return R.reshape(out, list(x_type.shape))


def _set_lower(L, x, v, *rest, slices, axes):
    idx = rest[:len(axes)]
    x_type, v_type = L.types[0], L.types[1]
    if v_type.size == 0:
        return _unchanged(L, x)
    grid = L.const(np.arange(x_type.size).reshape(x_type.shape), "int32")
    positions = _gather(L, grid, TensorType(x_type.shape, "int32"), idx,
                        L.types[2:2 + len(idx)], slices, axes)
    return _scatter(L, x, x_type, positions, v)


def _unchanged(L, x):
    """x itself as a new binding (an empty value writes nothing)."""
    return L.R.reshape(x, list(L.types[0].shape))


# -- .mge -----------------------------------------------------------------------------------
def _emit_items(em, rows: list[tuple[int, dict]], const_of):
    """Items (descending axis, as MegEngine writes them) and their index inputs."""
    items, inputs = [], []
    for axis, flags in sorted(rows, key=lambda r: -r[0]):
        items.append({"axis": axis, **{k: flags.get(k) is not None
                                       for k in ("begin", "end", "step", "idx")}})
        for key in ("begin", "end", "step", "idx"):
            value = flags.get(key)
            if value is not None:
                inputs.append(const_of(value))
    return items, inputs


def _vec_rows(p, rest):
    """Slice rows (their bounds as the run-time bound inputs after the index tensors
    when the node has them, as MegEngine writes `x[:x.shape[0] - 1, [0, 2]]`) and one
    row per index tensor."""
    n = len(p["axes"])
    bounds = [("input", b) for b in rest[n:]]
    rows = [(axis, {k: (bounds.pop(0) if bounds else v) if v is not None else None
                    for k, v in zip(("begin", "end", "step"), values)})
            for axis, *values in p["slices"]]
    rows += [(axis, {"idx": ("input", i)}) for axis, i in zip(p["axes"], rest[:n])]
    return rows


def _const_or_input(em):
    def const_of(value):
        if isinstance(value, tuple) and value[0] == "input":
            return value[1]
        return em.const(np.array([value], np.int32))
    return const_of


def _get_emit(em, types, p, inputs):
    items, extra = _emit_items(em, _vec_rows(p, inputs[1:]), _const_or_input(em))
    return em.opr(INDEXING, {"items": items}, [inputs[0], *extra])


def _set_emit(em, types, p, inputs):
    items, extra = _emit_items(em, _vec_rows(p, inputs[2:]), _const_or_input(em))
    return em.opr(INDEXING_SET, {"items": items}, [inputs[0], inputs[1], *extra])


# -- gradients (MegEngine: IndexingIncrMultiAxisVec / IndexingMultiAxisVec) ----------------
def _get_vjp(V, inputs, outputs, grads, *, slices, axes):
    """Each read element's gradient is added back where it was read (repeats add up)."""
    x, idx = inputs[0], inputs[1:1 + len(axes)]
    gx = V.apply("indexing_incr_multi_axis_vec", V.zeros_like(x), grads[0], *idx,
                 slices=slices, axes=axes)
    return (gx,) + (None,) * (len(inputs) - 1)


def _set_vjp(V, inputs, outputs, grads, *, slices, axes):
    """The overwritten elements of x get no gradient; v gets what reached them: every
    value written to one element twice gets that element's gradient, the one that stayed
    and the one overwritten alike (MegEngine 1.13's IndexingSetMultiAxisVec gradient,
    tests/data/show_megengine_duplicate_index_grads.py)."""
    v, idx = inputs[1], inputs[2:2 + len(axes)]
    g = grads[0]
    index = {"slices": slices, "axes": axes}
    gx = V.apply("indexing_set_multi_axis_vec", g, V.zeros_like(v), *idx, **index) \
        if V.needs_grad(0) else None
    gv = V.apply("indexing_multi_axis_vec", g, *idx, **index) if V.needs_grad(1) else None
    return (gx, gv) + (None,) * (len(inputs) - 2)


register(OpDef("indexing_multi_axis_vec", params={"slices": (), "axes": ()},
               int_inputs=_slice_bounds, fixed_inputs=lambda p: 1 + len(p["axes"]),
               eager=_get_eager, infer=_get_infer, lower=_get_lower,
               mge=MgeComposite(_get_emit), opaque_in_optimize=True, vjp=_get_vjp))
register(OpDef("indexing_set_multi_axis_vec", params={"slices": (), "axes": ()},
               int_inputs=_slice_bounds, fixed_inputs=lambda p: 2 + len(p["axes"]),
               eager=_set_eager, infer=_set_infer, lower=_set_lower,
               mge=MgeComposite(_set_emit), opaque_in_optimize=True, vjp=_set_vjp))


# -- set_subtensor ----------------------------------------------------------------------------
def _subtensor_shape(x: TensorType, index) -> tuple[int, ...]:
    from .shape import _subtensor_infer
    return _subtensor_infer(x, index=index).shape


def _set_subtensor_infer(x, v, *bounds, index):
    check_bound_inputs("set_subtensor", index, bounds)
    shape = _subtensor_shape(x, index)
    if v.dtype != x.dtype:
        raise DTypeError(f"set_subtensor: value {v} must have the dtype of {x}")
    if v.shape != shape:
        raise ShapeError(f"set_subtensor: value {v} must have the subtensor's shape {shape}")
    return x


def _set_subtensor_eager(x, v, *bounds, index):
    out = np.array(x)
    out[_index_tuple(x.ndim, index)] = v
    return out


def _set_subtensor_lower(L, x, v, *bounds, index):
    x_type = L.types[0]
    if L.types[1].size == 0:
        return _unchanged(L, x)
    positions = np.arange(x_type.size).reshape(x_type.shape)[_index_tuple(x_type.ndim, index)]
    return _scatter(L, x, x_type, L.const(np.ravel(positions), "int32"), v)


def _set_subtensor_emit(em, types, p, inputs):
    rows = index_inputs(em, p["index"], inputs[2:])
    items, extra = _emit_items(em, rows, lambda input_id: input_id)
    return em.opr(SET_SUBTENSOR, {"items": items}, [inputs[0], inputs[1], *extra])


register(OpDef("set_subtensor", params={"index": ()}, int_inputs=subtensor_bounds,
               eager=_set_subtensor_eager,
               infer=_set_subtensor_infer, lower=_set_subtensor_lower,
               mge=MgeComposite(_set_subtensor_emit), opaque_in_optimize=True,
               vjp=set_subtensor_vjp))
