"""Shape operators: reshape, flatten, get_shape, subtensor, concat, astype.

`get_shape`'s value depends only on its input's type, so the graph folds it into a
constant (MegEngine's static shape inference); Subtensor/Concat on shapes then fold too,
and a Reshape whose target comes from them gets a static shape.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtype as _dt
from ..errors import ShapeError
from ..ir import TensorType
from ._rules import norm_axis
from .grad_tensor import (astype_vjp, broadcast_to_vjp, concat_vjp, reshape_vjp,
                          subtensor_vjp)
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, register

GET_VAR_SHAPE = MgeOpr("GetVarShapeV1", "OptionalAxisV1")
SUBTENSOR = MgeOpr("Subtensor", "IndexDescMaskDump")
CONCAT = MgeOpr("Concat", "Axis", fields=lambda p: {"axis": p["axis"]},
                decode=lambda f: {"axis": f["axis"]})
RESHAPE = MgeOpr("ReshapeV1", "OptionalAxisV1")
TYPE_CVT = MgeOpr("TypeCvtV2", "DType", fields=lambda p: {"type": _dt.info(p["dtype"]).mge_enum},
                  decode=lambda f: {"dtype": _dt.from_mge_enum(f["type"]).name})


def _dummy(t: TensorType) -> np.ndarray:
    zero = np.zeros((), t.dtype)
    return np.lib.stride_tricks.as_strided(zero, t.shape, (0,) * t.ndim)


# -- reshape --------------------------------------------------------------------------
def resolve_shape(op: str, size: int, shape) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in shape):
        raise ShapeError(f"{op}: target shape {shape} may hold at most one -1 and no other "
                         "negative value")
    # Python integers: a file's target shape may name dimensions whose product overflows
    # int64 (refused below as a wrong element count, not an OverflowError)
    known = math.prod(d for d in shape if d != -1)
    if unknown:
        if known == 0 or size % known:
            raise ShapeError(f"{op}: cannot reshape {size} elements into {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    elif known != size:
        raise ShapeError(f"{op}: cannot reshape {size} elements into {shape}")
    return shape


def emit_reshape(em, x: int, shape, tshape: int | None = None) -> int:
    """ReshapeV1 to `shape`, given as a constant or by the shape value `tshape` (a traced
    shape expression); a -1 entry must be named by the param's axis."""
    shape = tuple(int(d) for d in shape)
    fields = {"axis": shape.index(-1)} if -1 in shape else {}
    if tshape is None:
        tshape = em.const(np.array(shape, np.int32))
    return em.opr(RESHAPE, fields, [x, tshape])


def check_shape_input(op: str, shape, tshape: TensorType | None) -> None:
    """The optional shape input (OpDef.shape_input) holds one int32 per target dim."""
    if tshape is not None and (tshape.dtype != "int32" or tshape.shape != (len(shape),)):
        raise ShapeError(f"{op}: the shape input must be int32[{len(shape)}]; got {tshape}")


def _reshape_infer(x, tshape=None, *, shape):
    check_shape_input("reshape", shape, tshape)
    return TensorType(resolve_shape("reshape", x.size, shape), x.dtype)


def _reshape_emit(em, types, p, inputs):
    return emit_reshape(em, inputs[0], p["shape"], inputs[1] if len(inputs) > 1 else None)


register(OpDef(
    "reshape", params={"shape": ()}, shape_input=True,
    eager=lambda x, tshape=None, *, shape: x.reshape(shape),
    infer=_reshape_infer,
    lower=lambda L, x, tshape=None, *, shape: L.R.reshape(x, L.out.shape),
    mge=MgeComposite(_reshape_emit),
    vjp=reshape_vjp,
))


# -- flatten --------------------------------------------------------------------------
def _flatten_axes(t: TensorType, start_axis: int, end_axis: int) -> tuple[int, int]:
    if t.ndim == 0:
        return 0, -1
    s, e = norm_axis("flatten", start_axis, t.ndim), norm_axis("flatten", end_axis, t.ndim)
    if s > e:
        raise ShapeError(f"flatten: start_axis {start_axis} is after end_axis {end_axis} "
                         f"for {t}")
    return s, e


def _flatten_infer(x, *, start_axis, end_axis):
    if x.ndim == 0:
        return TensorType((1,), x.dtype)
    s, e = _flatten_axes(x, start_axis, end_axis)
    mid = int(np.prod(x.shape[s:e + 1], dtype=np.int64))
    return TensorType(x.shape[:s] + (mid,) + x.shape[e + 1:], x.dtype)


def _flatten_emit(em, types, p, inputs):
    """Keep the batch symbolic, as MegEngine does: tshape = concat(shape[:s], -1, shape[e+1:])."""
    (t,), x = types, inputs[0]
    s, e = _flatten_axes(t, p["start_axis"], p["end_axis"])
    i32 = lambda *v: em.const(np.array(v, np.int32))  # noqa: E731
    shape = em.opr(GET_VAR_SHAPE, {}, [x]) if (s > 0 or e < t.ndim - 1) else None
    parts = []
    if s > 0:
        item = {"axis": 0, "begin": False, "end": True, "step": False, "idx": False}
        parts.append(em.opr(SUBTENSOR, {"items": [item]}, [shape, i32(s)]))
    parts.append(i32(-1))
    if e < t.ndim - 1:
        item = {"axis": 0, "begin": True, "end": False, "step": False, "idx": False}
        parts.append(em.opr(SUBTENSOR, {"items": [item]}, [shape, i32(e + 1)]))
    tshape = em.opr(CONCAT, {"axis": 0}, parts) if len(parts) > 1 else parts[0]
    return em.opr(RESHAPE, {"axis": s}, [x, tshape])


register(OpDef(
    "flatten", params={"start_axis": 0, "end_axis": -1},
    eager=lambda x, *, start_axis, end_axis: x.reshape(
        _flatten_infer(TensorType.of(x), start_axis=start_axis, end_axis=end_axis).shape),
    infer=_flatten_infer,
    lower=lambda L, x, **_: L.R.reshape(x, L.out.shape),
    mge=MgeComposite(_flatten_emit),
    vjp=reshape_vjp,
))

# -- get_shape ------------------------------------------------------------------------
register(OpDef(
    "get_shape", fold_from_types=True,
    eager=lambda x: np.array(x.shape, np.int32),
    infer=lambda x: TensorType((x.ndim,), "int32"),
    mge=GET_VAR_SHAPE,
    vjp=NOT_DIFFERENTIABLE,
))


# -- subtensor ------------------------------------------------------------------------
# index: one (axis, start, stop, step, idx) row per indexed axis; None marks "absent".
def _index_tuple(ndim: int, index) -> tuple:
    key: list = [slice(None)] * ndim
    for axis, start, stop, step, idx in index:
        key[axis] = int(idx) if idx is not None else slice(start, stop, step)
    return tuple(key)


def subtensor_bounds(p) -> list:
    """The given bounds of the index rows (start, stop, step, idx, row by row): what
    run-time bound inputs stand for (OpDef.int_inputs)."""
    return [v for row in p["index"] for v in row[1:] if v is not None]


def check_bound_inputs(op: str, index, bounds) -> None:
    """The optional run-time bounds (OpDef.int_inputs) are one int32 scalar per bound."""
    want = len(subtensor_bounds({"index": index}))
    if bounds and (len(bounds) != want or
                   any(b.dtype != "int32" or b.ndim != 0 for b in bounds)):
        raise ShapeError(f"{op}: run-time bounds must be {want} int32 scalars for index "
                         f"{index}; got {list(bounds)}")


def _subtensor_infer(x, *bounds, index):
    for row in index:
        norm_axis("subtensor", row[0], max(x.ndim, 1))
    check_bound_inputs("subtensor", index, bounds)
    try:
        return TensorType(_dummy(x)[_index_tuple(x.ndim, index)].shape, x.dtype)
    except IndexError as e:
        raise ShapeError(f"subtensor: index {index} out of range for {x}: {e}") from None


def relax_slice(sl: slice, size: int) -> tuple[int, int, int]:
    """(begin, end, stride) for Relax strided_slice: as Python's slice, except that an end
    before the first element (negative stride) must not read as "from the end"."""
    b, e, s = sl.indices(size)
    return b, (-size - 1 if e < 0 else e), s


def _subtensor_lower(L, x, *bounds, index):
    R, t = L.R, L.types[0]
    axes, begin, end, strides = [], [], [], []
    for axis, start, stop, step, idx in index:
        sl = slice(idx, idx + 1 if idx != -1 else None) if idx is not None else \
            slice(start, stop, step)
        b, e, s = relax_slice(sl, t.shape[axis])
        axes.append(axis), begin.append(b), end.append(e), strides.append(s)
    return R.reshape(L.normalize(R.strided_slice(x, axes, begin, end, strides)), L.out.shape)


def index_inputs(em, index, run_time: list[int]) -> list[tuple[int, dict[str, int]]]:
    """Each index row as (axis, {"begin"/"end"/"step"/"idx": input id}) for the bounds it
    gives: the node's run-time bound inputs (OpDef.int_inputs) when it has them (bounds
    computed from traced dims, as MegEngine writes `x[:x.shape[0] - 1]`), else Int32
    constants."""
    run_time = list(run_time)
    rows = []
    for axis, *values in index:
        rows.append((axis, {k: run_time.pop(0) if run_time else em.const(np.array([v], np.int32))
                            for k, v in zip(("begin", "end", "step", "idx"), values)
                            if v is not None}))
    return rows


def _subtensor_emit(em, types, p, inputs):
    """Index values are Int32 inputs, consumed item by item (begin, end, step, idx); items
    in descending axis order, as MegEngine writes them."""
    items, extra = [], []
    for axis, given in sorted(index_inputs(em, p["index"], inputs[1:]), key=lambda r: -r[0]):
        items.append({"axis": axis, **{k: k in given for k in ("begin", "end", "step", "idx")}})
        extra += given.values()
    return em.opr(SUBTENSOR, {"items": items}, [inputs[0], *extra])


register(OpDef(
    "subtensor", params={"index": ()}, int_inputs=subtensor_bounds,
    eager=lambda x, *bounds, index: np.array(x[_index_tuple(x.ndim, index)]),
    infer=_subtensor_infer, lower=_subtensor_lower, mge=MgeComposite(_subtensor_emit),
    vjp=subtensor_vjp,
))


# -- broadcast_to ---------------------------------------------------------------------
def _broadcast_infer(x, tshape=None, *, shape):
    check_shape_input("broadcast_to", shape, tshape)
    if len(shape) < x.ndim or any(d not in (1, s) for d, s in zip(x.shape[::-1], shape[::-1])):
        raise ShapeError(f"broadcast_to: cannot broadcast {x} to {tuple(shape)}")
    return TensorType(tuple(shape), x.dtype)


def _broadcast_emit(em, types, p, inputs):
    tshape = inputs[1] if len(inputs) > 1 else em.const(np.array(p["shape"], np.int32))
    return em.opr(BROADCAST, {}, [inputs[0], tshape])


register(OpDef(
    "broadcast_to", params={"shape": ()}, infer=_broadcast_infer, shape_input=True,
    eager=lambda x, tshape=None, *, shape: np.array(np.broadcast_to(x, shape)),
    lower=lambda L, x, tshape=None, *, shape: L.R.broadcast_to(x, L.out.shape),
    mge=MgeComposite(_broadcast_emit),
    vjp=broadcast_to_vjp,
))
BROADCAST = MgeOpr("Broadcast", "Empty")


# -- concat ---------------------------------------------------------------------------
def _concat_infer(*xs, axis):
    if not xs:
        raise ShapeError("concat: needs at least one tensor")
    first = xs[0]
    ax = norm_axis("concat", axis, first.ndim)
    for t in xs[1:]:
        if t.dtype != first.dtype or t.ndim != first.ndim or \
                t.shape[:ax] + t.shape[ax + 1:] != first.shape[:ax] + first.shape[ax + 1:]:
            raise ShapeError(f"concat: {t} does not match {first} outside axis {axis}")
    size = sum(t.shape[ax] for t in xs)
    return TensorType(first.shape[:ax] + (size,) + first.shape[ax + 1:], first.dtype)


register(OpDef(
    "concat", params={"axis": 0},
    eager=lambda *xs, axis: np.concatenate(xs, axis=axis),
    infer=_concat_infer,
    lower=lambda L, *xs, axis: L.R.concat(list(xs), axis=axis),
    mge=CONCAT,
    vjp=concat_vjp,
))

# -- astype ---------------------------------------------------------------------------
def _astype(x: np.ndarray, *, dtype: str) -> np.ndarray:
    """TypeCvt: nan or inf to an integer gives what the cast gives, without NumPy's
    "invalid value encountered in cast" (MegEngine says nothing)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(dtype)


register(OpDef(
    "astype", params={"dtype": "float32"},
    eager=_astype,
    infer=lambda x, *, dtype: TensorType(x.shape, dtype),
    lower=lambda L, x, *, dtype: L.R.astype(x, dtype),
    mge=TYPE_CVT,
    vjp=astype_vjp,
))
