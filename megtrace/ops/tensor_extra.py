"""Ops behind MegEngine's diag, gather, scatter and copy.

gather/scatter index every axis with a flat int32 vector, exactly as MegEngine 1.13
writes them (IndexingMultiAxisVec / IndexingSetMultiAxisVec over arange vectors for the
other axes and the flattened index for `axis`); the arange vectors are computed from the
index's run-time shape (Linspace, Broadcast), so the file runs at any batch size.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from ._rules import norm_axis
from . import shape_emit
from .grad_tensor import identity_vjp
from .registry import MgeComposite, MgeOpr, OpDef, register
from .shape import TYPE_CVT as _TYPE_CVT, emit_reshape

_INT = ("int32", "int16", "int8", "uint8")


# -- diag -----------------------------------------------------------------------------------
def _diag_len(rows: int, cols: int, k: int) -> int:
    return max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))


def _diag_infer(x, *, k):
    if x.ndim == 1:
        n = x.shape[0] + abs(k)
        return TensorType((n, n), x.dtype)
    if x.ndim == 2:
        return TensorType((_diag_len(*x.shape, k),), x.dtype)
    raise ShapeError(f"diag: expected a 1-d or 2-d tensor, got {x}")


def _diag_positions(t: TensorType, k: int) -> np.ndarray:
    """Flat source positions per output element; a 1-d source's slot `n` is the zero."""
    if t.ndim == 2:
        rows, cols = t.shape
        i = np.arange(_diag_len(rows, cols, k))
        r, c = (i, i + k) if k >= 0 else (i - k, i)
        return (r * cols + c).astype(np.int32)
    n = t.shape[0]
    size = n + abs(k)
    pos = np.full((size, size), n, np.int32)
    i = np.arange(n)
    r, c = (i, i + k) if k >= 0 else (i - k, i)
    pos[r, c] = i
    return pos.reshape(-1)


def _diag_lower(L, x, *, k):
    R, t = L.R, L.types[0]
    pos = L.const(_diag_positions(t, k), "int32")
    if t.ndim == 2:
        return R.take(R.reshape(x, (-1,)), pos, axis=0)
    padded = R.concat([x, R.zeros((1,), t.dtype)], axis=0)
    return R.reshape(R.take(padded, pos, axis=0), L.out.shape)


def _int_const(V, values, like):
    return V.apply("astype", V.const(np.asarray(values), like), dtype="int32")


def _diag_vjp(V, inputs, outputs, grads, *, k):
    """The diagonal's (row, col) pairs: read back from g (vector input) or written into
    zeros (matrix input)."""
    (x,), (g,) = inputs, grads
    n = x.shape[0] if x.ndim == 1 else _diag_len(*x.shape, k)
    i = np.arange(n)
    rows, cols = (i, i + k) if k >= 0 else (i - k, i)
    rows, cols = _int_const(V, rows, g), _int_const(V, cols, g)
    if x.ndim == 1:
        return (V.apply("indexing_multi_axis_vec", g, rows, cols, axes=(0, 1)),)
    return (V.apply("indexing_set_multi_axis_vec", V.zeros_like(x), g, rows, cols,
                    axes=(0, 1)),)


register(OpDef("diag", params={"k": 0}, infer=_diag_infer,
               eager=lambda x, *, k: np.array(np.diag(x, k)),
               lower=_diag_lower,
               mge=MgeOpr("Diag", "Diag", fields=lambda p: {"k": p["k"]},
                          decode=lambda f: {"k": f["k"]}), vjp=_diag_vjp))


# -- gather / scatter along one axis (index has the input's rank) -------------------------
def _gather_check(name: str, x: TensorType, index: TensorType, axis: int) -> int:
    if index.dtype not in _INT:
        raise DTypeError(f"{name}: index must be an integer tensor; got {index}")
    if index.ndim != x.ndim:
        raise ShapeError(f"{name}: the index tensor must have the input's {x.ndim} dims; "
                         f"got {index}")
    ax = norm_axis(name, axis, x.ndim)
    for d, (i, s) in enumerate(zip(index.shape, x.shape)):
        if d != ax and i > s:
            raise ShapeError(f"{name}: index {index} is larger than input {x} on axis {d}")
    return ax


def _grid(x: np.ndarray, index: np.ndarray, ax: int, name: str) -> tuple:
    """NumPy index tuple: positions of `index` on every axis, `index` itself on `ax`."""
    size = x.shape[ax]
    if index.size and (index.min() < -size or index.max() >= size):
        raise IndexError(f"{name}: index out of range for axis {ax} of size {size}")
    grid = list(np.indices(index.shape, sparse=True))
    grid[ax] = index
    return tuple(grid)


def _gather_infer(x, index, *, axis):
    _gather_check("gather", x, index, axis)
    return TensorType(index.shape, x.dtype)


def _gather_eager(x, index, *, axis):
    ax = norm_axis("gather", axis, x.ndim)
    return np.array(x[_grid(x, index, ax, "gather")])


def _fit(L, x, t: TensorType, shape, ax: int):
    """Slice `x` down to `shape` on every axis but `ax` (Relax's gather/scatter_elements
    want the index's extent there)."""
    axes = [d for d in range(t.ndim) if d != ax and shape[d] != t.shape[d]]
    if not axes:
        return x
    return L.R.strided_slice(x, axes, [0] * len(axes), [shape[d] for d in axes],
                             [1] * len(axes))


def _gather_lower(L, x, index, *, axis):
    t, it = L.types
    ax = norm_axis("gather", axis, t.ndim)
    return L.R.gather_elements(_fit(L, x, t, it.shape, ax), index, axis=ax)


def _axis_vectors(em, index_type: TensorType, index: int, index_shape: int,
                  ax: int) -> list[int]:
    """One flat int32 vector per axis: aranges broadcast over the index's run-time shape
    `index_shape`, and the flattened index itself on `ax`."""
    flat = []
    for d in range(index_type.ndim):
        if d == ax:
            idx = index if index_type.dtype == "int32" else em.opr(
                _TYPE_CVT, _TYPE_CVT.fields({"dtype": "int32"}), [index])
            flat.append(emit_reshape(em, idx, (-1,)))
        else:
            flat.append(shape_emit.axis_grid(em, index_shape, index_type.ndim, d))
    return flat


def _items(ndim: int) -> list[dict]:
    return [{"axis": d, "begin": False, "end": False, "step": False, "idx": True}
            for d in range(ndim)]


def _gather_emit(em, types, p, inputs):
    t, it = types
    ax = norm_axis("gather", p["axis"], t.ndim)
    index_shape = shape_emit.shape_of(em, inputs[1])
    vectors = _axis_vectors(em, it, inputs[1], index_shape, ax)
    flat = em.opr(INDEXING, {"items": _items(t.ndim)}, [inputs[0], *vectors])
    return emit_reshape(em, flat, it.shape, index_shape)


def _scatter_infer(x, index, source, *, axis):
    _gather_check("scatter", x, index, axis)
    if source.shape != index.shape:
        raise ShapeError(f"scatter: source {source} must have the index's shape {index.shape}")
    if source.dtype != x.dtype:
        raise DTypeError(f"scatter: source {source} must have the input's dtype {x.dtype}")
    return x


def _scatter_eager(x, index, source, *, axis):
    ax = norm_axis("scatter", axis, x.ndim)
    out = x.copy()
    out[_grid(x, index, ax, "scatter")] = source
    return out


def _scatter_lower(L, x, index, source, *, axis):
    ax = norm_axis("scatter", axis, L.types[0].ndim)
    return L.R.scatter_elements(x, index, source, axis=ax)


def _scatter_emit(em, types, p, inputs):
    t, it, _ = types
    ax = norm_axis("scatter", p["axis"], t.ndim)
    vectors = _axis_vectors(em, it, inputs[1], shape_emit.shape_of(em, inputs[1]), ax)
    values = emit_reshape(em, inputs[2], (-1,))
    return em.opr(INDEXING_SET, {"items": _items(t.ndim)}, [inputs[0], values, *vectors])


INDEXING = MgeOpr("IndexingMultiAxisVec", "IndexDescMaskDump")
INDEXING_SET = MgeOpr("IndexingSetMultiAxisVec", "IndexDescMaskDump")

def _gather_vjp(V, inputs, outputs, grads, *, axis):
    """Each picked element's gradient is added back where it was read (every axis
    indexed: aranges, and the index on `axis`)."""
    (x, index), (g,) = inputs, grads
    ax = norm_axis("gather", axis, x.ndim)
    vectors = [index if d == ax else _int_const(
        V, np.arange(s).reshape(tuple(s if e == d else 1 for e in range(x.ndim))), g)
        for d, s in enumerate(index.shape)]
    return V.apply("indexing_incr_multi_axis_vec", V.zeros_like(x), g, *vectors,
                   axes=tuple(range(x.ndim))), None


def _scatter_vjp(V, inputs, outputs, grads, *, axis):
    """Overwritten elements of x get no gradient; each source element gets the gradient
    of the element it was written to, repeated writes too (MegEngine's scatter is a
    setitem: tests/data/show_megengine_duplicate_index_grads.py)."""
    (x, index, source), (g,) = inputs, grads
    gx = V.apply("scatter", g, index, V.zeros_like(source), axis=axis) \
        if V.needs_grad(0) else None
    gs = V.apply("gather", g, index, axis=axis) if V.needs_grad(2) else None
    return gx, None, gs


register(OpDef("gather", params={"axis": 0}, eager=_gather_eager, infer=_gather_infer,
               lower=_gather_lower, mge=MgeComposite(_gather_emit), vjp=_gather_vjp))
register(OpDef("scatter", params={"axis": 0}, eager=_scatter_eager, infer=_scatter_infer,
               lower=_scatter_lower, mge=MgeComposite(_scatter_emit), vjp=_scatter_vjp))


# -- copy (MegEngine's Identity) ------------------------------------------------------------
register(OpDef("copy", eager=lambda x: x.copy(), infer=lambda x: x,
               lower=lambda L, x: L.R.reshape(x, L.out.shape),
               mge=MgeOpr("Identity", "Empty"), vjp=identity_vjp))
