"""Matrix multiplication (MegEngine's MatrixMul / BatchedMatrixMul)."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from . import quantized_lower
from ._rules import broadcast_shapes, same_dtype
from .grad_tensor import matmul_vjp
from .registry import MgeChoice, MgeComposite, MgeOpr, OpDef, register
from .reduce import REDUCE
from .shape import CONCAT, GET_VAR_SHAPE, RESHAPE, SUBTENSOR, emit_reshape


def _matmul_infer(a, b, *, transpose_a, transpose_b, compute_mode="DEFAULT"):
    dtype = same_dtype("matmul", a, b)
    if compute_mode not in ("DEFAULT", "FLOAT32"):
        raise ValueError(f"matmul: compute_mode must be 'DEFAULT' or 'FLOAT32'; got "
                         f"{compute_mode!r}")
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: operands must be at least 2-d; got {a} and {b}")
    m, ka = (a.shape[-1], a.shape[-2]) if transpose_a else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if transpose_b else b.shape[-2:]
    if ka != kb:
        raise ShapeError(f"matmul: inner dimensions differ; got {a} and {b} with "
                         f"transpose_a={transpose_a}, transpose_b={transpose_b}")
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    return TensorType(batch + (m, n), dtype)


def _matmul_eager(a, b, *, transpose_a, transpose_b, compute_mode="DEFAULT"):
    dtype = a.dtype
    if compute_mode == "FLOAT32" and dtype == np.float16:
        a, b = a.astype(np.float32), b.astype(np.float32)
    a = np.swapaxes(a, -1, -2) if transpose_a else a
    b = np.swapaxes(b, -1, -2) if transpose_b else b
    return np.matmul(a, b).astype(dtype)


def _matmul_lower(L, a, b, *, transpose_a, transpose_b, compute_mode="DEFAULT"):
    R = L.R
    ta, tb = L.types
    if transpose_a:
        a = R.permute_dims(a, list(range(ta.ndim - 2)) + [ta.ndim - 1, ta.ndim - 2])
    if transpose_b:
        b = R.permute_dims(b, list(range(tb.ndim - 2)) + [tb.ndim - 1, tb.ndim - 2])
    if compute_mode == "FLOAT32" and ta.dtype == "float16":   # float32 sums, float16 out
        return R.astype(R.matmul(a, b, out_dtype="float32"), "float16")
    if ta.quant is not None:            # MegEngine's quantized dtypes: int32 sums
        return quantized_lower.lower_matmul(L, a, b, ta, tb)
    return R.matmul(a, b)


def _matmul_fields(p):
    return {"transposeA": p["transpose_a"], "transposeB": p["transpose_b"],
            "compute_mode": p.get("compute_mode", "DEFAULT")}


def _matmul_decode(f):
    return {"transpose_a": bool(f["transposeA"]), "transpose_b": bool(f["transposeB"]),
            "compute_mode": f.get("compute_mode", "DEFAULT")}


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
    """N-d matmul as MegEngine 1.13 dumps F.matmul: the batch axes are folded with shapes
    computed at run time (GetVarShape, Subtensor, Reduce PRODUCT, Concat), so the file runs
    at any batch size. x @ W (2-d W) folds the batch into rows of one MatrixMul; batched
    operands become 3-d for BatchedMatrixMul; the result is reshaped back."""
    ta, tb = types
    a, b = inputs
    fields = _matmul_fields(p)
    shapes = _ShapeParts(em)
    if tb.ndim == 2 and not p["transpose_a"]:
        lead, rows = shapes.fold(a, 1)
        y = em.opr(MATRIX_MUL, fields, [shapes.reshape(a, [rows, shapes.tail(a, 1)]), b])
        return shapes.reshape(y, [lead, shapes.tail(y, 1)])
    out = _matmul_infer(ta, tb, **p)
    batch = out.shape[:-2]
    full = [i for i, t in enumerate(types) if t.shape[:-2] == batch]
    if not full:            # both operands broadcast: only the traced batch is known
        return _matmul_emit_static(em, types, p, inputs, out)
    src = inputs[full[0]]
    lead, count = shapes.fold(src, 2)
    flat = []
    for x, t in zip(inputs, types):
        if t.shape[:-2] != batch:
            x = em.opr(BROADCAST, {}, [x, shapes.concat([lead, shapes.tail(x, 2)])])
        flat.append(shapes.reshape(x, [count, shapes.tail(x, 2)]))
    y = em.opr(BATCHED_MATRIX_MUL, fields, flat)
    return shapes.reshape(y, [lead, shapes.tail(y, 2)])


class _ShapeParts:
    """Run-time shape pieces as MegEngine writes them: shape[:-k], its product, shape[-k:]."""

    def __init__(self, em):
        self.em = em
        self._consts: dict[int, int] = {}
        self._shapes: dict[int, int] = {}

    def _int(self, v: int) -> int:
        if v not in self._consts:
            self._consts[v] = self.em.const(np.array([v], np.int32))
        return self._consts[v]

    def _slice(self, x: int, k: int, head: bool) -> int:
        item = {"axis": 0, "begin": not head, "end": head, "step": False, "idx": False}
        if x not in self._shapes:
            self._shapes[x] = self.em.opr(GET_VAR_SHAPE, {}, [x])
        return self.em.opr(SUBTENSOR, {"items": [item]}, [self._shapes[x], self._int(-k)])

    def fold(self, x: int, k: int) -> tuple[int, int]:
        """(shape[:-k], product of it) of x."""
        lead = self._slice(x, k, head=True)
        return lead, self.em.opr(REDUCE, {"mode": "PRODUCT", "axis": 0}, [lead])

    def tail(self, x: int, k: int) -> int:
        return self._slice(x, k, head=False)

    def concat(self, parts: list[int]) -> int:
        return self.em.opr(CONCAT, {"axis": 0}, parts)

    def reshape(self, x: int, parts: list[int]) -> int:
        return self.em.opr(RESHAPE, {}, [x, self.concat(parts)])


def _matmul_emit_static(em, types, p, inputs, out):
    """Both operands broadcast along the batch: reshapes to the traced shapes."""
    ta, tb = types
    batch = out.shape[:-2]
    n = int(np.prod(batch, dtype=np.int64))
    flat = []
    for x, t in zip(inputs, types):
        full = batch + t.shape[-2:]
        if t.shape != full:
            x = em.opr(BROADCAST, {}, [x, em.const(np.array(full, np.int32))])
        flat.append(emit_reshape(em, x, (n,) + t.shape[-2:]))
    y = em.opr(BATCHED_MATRIX_MUL, _matmul_fields(p), flat)
    return emit_reshape(em, y, out.shape)


MATRIX_MUL = MgeOpr("MatrixMulV2", "MatrixMul", fields=_matmul_fields, decode=_matmul_decode)
BATCHED_MATRIX_MUL = MgeOpr("BatchedMatrixMulV2", "MatrixMul", fields=_matmul_fields,
                            decode=_matmul_decode)
BROADCAST = MgeOpr("Broadcast", "Empty")

register(OpDef("matmul", eager=_matmul_eager, infer=_matmul_infer, lower=_matmul_lower,
               params={"transpose_a": False, "transpose_b": False, "compute_mode": "DEFAULT"},
               mge=MgeChoice(_matmul_mge, (MATRIX_MUL, BATCHED_MATRIX_MUL)), vjp=matmul_vjp))
