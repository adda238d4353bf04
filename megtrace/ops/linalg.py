"""Matrix multiplication (MegEngine's MatrixMul / BatchedMatrixMul)."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from ._rules import broadcast_shapes, same_dtype
from .registry import MgeChoice, MgeComposite, MgeOpr, OpDef, register
from .shape import emit_reshape


def _matmul_infer(a, b, *, transpose_a, transpose_b):
    dtype = same_dtype("matmul", a, b)
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: operands must be at least 2-d; got {a} and {b}")
    m, ka = (a.shape[-1], a.shape[-2]) if transpose_a else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if transpose_b else b.shape[-2:]
    if ka != kb:
        raise ShapeError(f"matmul: inner dimensions differ; got {a} and {b} with "
                         f"transpose_a={transpose_a}, transpose_b={transpose_b}")
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    return TensorType(batch + (m, n), dtype)


def _matmul_eager(a, b, *, transpose_a, transpose_b):
    a = np.swapaxes(a, -1, -2) if transpose_a else a
    b = np.swapaxes(b, -1, -2) if transpose_b else b
    return np.matmul(a, b).astype(a.dtype)


def _matmul_lower(L, a, b, *, transpose_a, transpose_b):
    R = L.R
    ta, tb = L.types
    if transpose_a:
        a = R.permute_dims(a, list(range(ta.ndim - 2)) + [ta.ndim - 1, ta.ndim - 2])
    if transpose_b:
        b = R.permute_dims(b, list(range(tb.ndim - 2)) + [tb.ndim - 1, tb.ndim - 2])
    return R.matmul(a, b)


def _matmul_fields(p):
    return {"transposeA": p["transpose_a"], "transposeB": p["transpose_b"]}


def _matmul_decode(f):
    return {"transpose_a": bool(f["transposeA"]), "transpose_b": bool(f["transposeB"])}


def _matmul_mge(types):
    """2-d operands are MatrixMul, equal-batch 3-d ones BatchedMatrixMul (as MegEngine
    writes them); anything else is reshaped around one of them."""
    a, b = types
    if a.ndim == b.ndim == 2:
        return MATRIX_MUL
    if a.ndim == b.ndim == 3 and a.shape[0] == b.shape[0]:
        return BATCHED_MATRIX_MUL
    return MgeComposite(_matmul_emit)


def _matmul_emit(em, types, p, inputs):
    """N-d matmul as MegEngine graphs spell it: x @ W (2-d W) folds the batch into rows;
    batched operands are broadcast, flattened to 3-d, multiplied and reshaped back."""
    ta, tb = types
    a, b = inputs
    out = _matmul_infer(ta, tb, **p)
    i32 = lambda shape: em.const(np.array(shape, np.int32))  # noqa: E731
    fields = _matmul_fields(p)
    if tb.ndim == 2 and not p["transpose_a"]:
        rows = emit_reshape(em, a, (-1, ta.shape[-1]))
        y = em.opr(MATRIX_MUL, fields, [rows, b])
        return emit_reshape(em, y, out.shape)
    batch = out.shape[:-2]
    n = int(np.prod(batch, dtype=np.int64))
    flat = []
    for x, t in ((a, ta), (b, tb)):
        full = batch + t.shape[-2:]
        if t.shape != full:
            x = em.opr(BROADCAST, {}, [x, i32(full)])
        flat.append(emit_reshape(em, x, (n,) + t.shape[-2:]))
    y = em.opr(BATCHED_MATRIX_MUL, fields, flat)
    return emit_reshape(em, y, out.shape)


MATRIX_MUL = MgeOpr("MatrixMulV2", "MatrixMul", fields=_matmul_fields, decode=_matmul_decode)
BATCHED_MATRIX_MUL = MgeOpr("BatchedMatrixMulV2", "MatrixMul", fields=_matmul_fields,
                            decode=_matmul_decode)
BROADCAST = MgeOpr("Broadcast", "Empty")

register(OpDef("matmul", eager=_matmul_eager, infer=_matmul_infer, lower=_matmul_lower,
               params={"transpose_a": False, "transpose_b": False},
               mge=MgeChoice(_matmul_mge, (MATRIX_MUL, BATCHED_MATRIX_MUL))))
