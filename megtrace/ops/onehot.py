"""One-hot ops: indexing_one_hot (MegEngine's IndexingOneHot: pick src[..., index, ...]
along an axis, keeping it as size 1) and one_hot (IndexingSetOneHot on zeros)."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from .grad_tensor import indexing_one_hot_vjp
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, get, register
from .shape import BROADCAST, CONCAT, GET_VAR_SHAPE

INDEXING_SET_ONE_HOT = MgeOpr("IndexingSetOneHot", "Axis")


def _check_index(name: str, index) -> None:
    if index.dtype != "int32":
        raise TypeError(f"{name}: index must be int32; got {index}")


# -- indexing_one_hot ---------------------------------------------------------------------
def _pick_infer(src, index, *, axis):
    _check_index("indexing_one_hot", index)
    if not 0 <= axis < src.ndim:
        raise ShapeError(f"indexing_one_hot: axis {axis} out of range for {src}")
    if index.shape != src.shape[:axis] + src.shape[axis + 1:]:
        raise ShapeError(f"indexing_one_hot: index shape {index.shape} must be {src} without "
                         f"axis {axis}")
    return TensorType(src.shape[:axis] + (1,) + src.shape[axis + 1:], src.dtype)


def _pick_eager(src, index, *, axis):
    if index.size and (index.min() < 0 or index.max() >= src.shape[axis]):
        raise IndexError(f"indexing_one_hot: index out of range [0, {src.shape[axis]})")
    return np.take_along_axis(src, np.expand_dims(index, axis).astype(np.int64), axis)


def _pick_lower(L, src, index, *, axis):
    return L.R.gather_elements(src, L.R.expand_dims(index, axis), axis=axis)


register(OpDef("indexing_one_hot", params={"axis": 1}, eager=_pick_eager, infer=_pick_infer,
               lower=_pick_lower,
               mge=MgeOpr("IndexingOneHot", "Axis", fields=lambda p: {"axis": p["axis"]},
                          decode=lambda f: {"axis": int(f["axis"])}),
               opaque_in_optimize=True, vjp=indexing_one_hot_vjp))


# -- one_hot ------------------------------------------------------------------------------
def _one_hot_infer(index, *, num_classes):
    if index.dtype not in ("int32", "int8", "uint8", "int16"):
        raise TypeError(f"one_hot: input must be an integer tensor; got {index}")
    if num_classes <= 0:
        raise ShapeError(f"one_hot: num_classes must be positive; got {num_classes}")
    return TensorType(index.shape + (num_classes,), index.dtype)


def _one_hot_eager(index, *, num_classes):
    if index.size and (index.min() < 0 or index.max() >= num_classes):
        raise IndexError(f"one_hot: index out of range [0, {num_classes})")
    return (index[..., None] == np.arange(num_classes)).astype(index.dtype)


def _one_hot_lower(L, index, *, num_classes):
    R = L.R
    classes = L.const(np.arange(num_classes), L.types[0].dtype)
    return R.astype(R.equal(R.expand_dims(index, -1), classes), L.out.dtype)


def _one_hot_emit(em, types, p, inputs):
    """As MegEngine writes F.one_hot: IndexingSetOneHot(zeros, index, ones) on the new
    last axis, zeros and ones broadcast to the index's run-time shape (so the file runs at
    any batch size)."""
    dtype = types[0].dtype
    shape = em.opr(GET_VAR_SHAPE, {}, [inputs[0]])

    def filled(value, last: int) -> int:
        target = em.opr(CONCAT, {"axis": 0}, [shape, em.const(np.array([last], np.int32))])
        return em.opr(BROADCAST, {}, [em.const(np.array([value], dtype)), target])
    return em.opr(INDEXING_SET_ONE_HOT, {"axis": types[0].ndim},
                  [filled(0, p["num_classes"]), inputs[0], filled(1, 1)])


def _read_set_one_hot(g, opr, ins, _types):
    """IndexingSetOneHot(data, index, value): data with value written at index along the
    axis (F.one_hot writes it on zeros), read as a scatter."""
    data, index, value = ins
    axis = int(opr.params[0][1].get("axis", 0)) if opr.params else 0
    (at,) = g.add_node(get("expand_dims"), [index], {"axis": (axis,)})
    return list(g.add_node(get("scatter"), [data, at, value], {"axis": axis}))


register(OpDef("one_hot", params={"num_classes": 1}, eager=_one_hot_eager,
               infer=_one_hot_infer, lower=_one_hot_lower, mge=MgeComposite(_one_hot_emit),
               opaque_in_optimize=True,
               mge_read={"IndexingSetOneHot": _read_set_one_hot}, vjp=NOT_DIFFERENTIABLE))
