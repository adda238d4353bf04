"""Sorting and small linear algebra: argsort (MegEngine's Argsort), the k-th value (TopK
KTH_ONLY), dot (Dot) and matinv (MatrixInverse)."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedOpError
from ..ir import TensorType
from ._rules import lower_sorted, same_dtype, sort_order
from .grad_tensor import dot_vjp
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, get, register


def _rows(name: str, x: TensorType) -> None:
    if x.ndim != 2:
        raise ShapeError(f"{name}: expected a 2-d (batch, n) tensor, got {x}")


# -- argsort: sorted values and their int32 indices along the last axis of a 2-d tensor ---
def _argsort_infer(x, *, descending):
    _rows("argsort", x)
    return x, TensorType(x.shape, "int32")


def _argsort_eager(x, *, descending):
    order = sort_order(x, descending)
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)


def _argsort_lower(L, x, *, descending):
    return lower_sorted(L, x, L.types[0].shape[-1], descending)


ARGSORT = MgeOpr("Argsort", "Argsort",
                 fields=lambda p: {"order": "DESCENDING" if p["descending"] else "ASCENDING"},
                 decode=lambda f: {"descending": f["order"] == "DESCENDING"},
                 outputs=2, results=(0, 1))

def _argsort_vjp(V, inputs, outputs, grads, *, descending):
    """The sorted values' gradient goes back to where each came from (MegEngine's
    ArgsortBackward); the indices have none."""
    (x,), (_, order), (g, _) = inputs, outputs, grads
    if g is None or x.dtype.kind != "f":
        return (None,)
    return (V.apply("scatter", V.zeros_like(x), order, g, axis=x.ndim - 1),)


register(OpDef("argsort", params={"descending": False}, eager=_argsort_eager,
               infer=_argsort_infer, lower=_argsort_lower, mge=ARGSORT, vjp=_argsort_vjp))


# -- kth_value: the k-th smallest (largest if descending) element of each row --------------
def _kth_infer(x, *, k, descending):
    _rows("kth_value", x)
    if not 1 <= k <= x.shape[-1]:
        raise ShapeError(f"kth_value: k={k} is out of range for {x}")
    return TensorType(x.shape[:-1], x.dtype)


def _kth_eager(x, *, k, descending):
    ordered = np.sort(x, axis=-1)
    return np.array(ordered[..., -k] if descending else ordered[..., k - 1])


def _kth_lower(L, x, *, k, descending):
    R = L.R
    top = R.topk(x, k=k, axis=-1, ret_type="values", largest=descending)
    last = R.strided_slice(top, [1], [k - 1], [k], [1])
    return R.reshape(last, L.out.shape)


def _kth_emit(em, types, p, inputs):
    """MegEngine's TopK takes the k smallest; a negative k asks for the largest."""
    k = em.const(np.array([-p["k"] if p["descending"] else p["k"]], np.int32))
    return em.opr(KTH_ONLY, {"mode": "KTH_ONLY"}, [inputs[0], k])


KTH_ONLY = MgeOpr("TopK", "TopK", match={"mode": "KTH_ONLY"})

def _kth_vjp(V, inputs, outputs, grads, *, k, descending):
    """MegEngine's TopK KTH_ONLY rule: shared equally by the elements equal to the value."""
    (x,), (y,), (g,) = inputs, outputs, grads
    hit = V.apply("eq", x, V.apply("expand_dims", y, axis=(1,)))
    mask = V.apply("astype", hit, dtype=g.dtype.name)
    count = V.apply("reduce", mask, mode="sum", axis=(1,), keepdims=True)
    return (V.apply("expand_dims", g, axis=(1,)) / count * mask,)


register(OpDef("kth_value", params={"k": 1, "descending": False}, eager=_kth_eager,
               infer=_kth_infer, lower=_kth_lower, mge=MgeComposite(_kth_emit), vjp=_kth_vjp))


# -- dot: inner product of two vectors (or scalars) -------------------------------------
def _dot_infer(a, b):
    dtype = same_dtype("dot", a, b)
    if a.ndim > 1 or b.ndim > 1 or a.size != b.size:
        raise ShapeError(f"dot: operands must be vectors (or scalars) of one length; got "
                         f"{a} and {b}")
    return TensorType((), dtype)


def _dot_eager(a, b):
    wide = np.float64 if a.dtype.kind == "f" else np.int64
    return np.array(np.sum(a.astype(wide).ravel() * b.astype(wide).ravel())).astype(a.dtype)


def _dot_lower(L, a, b):
    R = L.R
    return R.sum(R.multiply(R.reshape(a, (-1,)), R.reshape(b, (-1,))))


def _dot_emit(em, types, p, inputs):
    """MegEngine's Dot gives shape (1,); the scalar result drops that axis."""
    out = em.opr(DOT, {}, inputs)
    return em.opr(MgeOpr("AxisAddRemove", "AxisAddRemove"),
                  {"desc": [{"method": "REMOVE", "axis": 0}]}, [out])


def _read_dot(g, opr, ins, _types):
    """MegEngine's Dot gives shape (1,), megtrace's dot a scalar."""
    (y,) = g.add_node(get("dot"), ins, {})
    return list(g.add_node(get("reshape"), [y], {"shape": (1,)}))


DOT = MgeOpr("Dot", "Empty")
register(OpDef("dot", eager=_dot_eager, infer=_dot_infer, lower=_dot_lower,
               mge=MgeComposite(_dot_emit), mge_read={"Dot": _read_dot}, vjp=dot_vjp))


# -- matinv: inverse of each square matrix in the last two axes --------------------------
def _matinv_infer(x):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"matinv: expected (..., n, n) square matrices, got {x}")
    if x.dtype not in ("float32", "float16"):
        raise DTypeError(f"matinv: operand must be a float tensor; got {x}")
    return x


def _matinv_eager(x):
    return np.linalg.inv(x.astype(np.float64)).astype(x.dtype)


# Relax has no matrix inverse: compiled graphs holding one run on the NumPy interpreter.
def _matinv_vjp(V, inputs, outputs, grads):
    """d(A^-1) = -A^-1 dA A^-1, so gA = -Y^T g Y^T with Y = A^-1."""
    (y,), (g,) = outputs, grads
    inner = V.apply("matmul", g, y, transpose_a=False, transpose_b=True)
    return (V.apply("neg", V.apply("matmul", y, inner, transpose_a=True, transpose_b=False)),)


register(OpDef("matinv", eager=_matinv_eager, infer=_matinv_infer, interpreted=True,
               mge=MgeOpr("MatrixInverse", "Empty"), vjp=_matinv_vjp))


# -- svd: U, S, Vh of each matrix in the last two axes ------------------------------------
def _svd_infer(x, *, full_matrices):
    if x.ndim < 2:
        raise ShapeError(f"svd: expected (..., m, n) matrices, got {x}")
    if x.dtype not in ("float32", "float16"):
        raise DTypeError(f"svd: operand must be a float tensor; got {x}")
    *batch, m, n = x.shape
    k = min(m, n)
    u, v = (m, m) if full_matrices else (m, k), (n, n) if full_matrices else (k, n)
    return (TensorType((*batch, *u), x.dtype), TensorType((*batch, k), x.dtype),
            TensorType((*batch, *v), x.dtype))


def _svd_eager(x, *, full_matrices):
    u, s, vh = np.linalg.svd(x.astype(np.float64), full_matrices=full_matrices)
    return u.astype(x.dtype), s.astype(x.dtype), vh.astype(x.dtype)


# Relax has no SVD: compiled graphs holding it run on the NumPy interpreter.
SVD = MgeOpr("SVD", "SVD", fields=lambda p: {"full_matrices": p["full_matrices"],
                                             "compute_uv": True},
             decode=lambda f: {"full_matrices": bool(f["full_matrices"])}, outputs=3,
             results=(0, 1, 2))


def _svd_emit(em, types, p, inputs):
    """MegEngine's SVD opr (outputs U, S, Vh). Its CPU kernels compute the reduced
    factors only, so a file with full_matrices could not run in MegEngine (Lite)."""
    if p["full_matrices"]:
        raise UnsupportedOpError(
            "svd(full_matrices=True) cannot be written: MegEngine 1.13's CPU SVD refuses "
            "it (\"Computing full singular vectors is not supported in naive "
            "implementation.\")")
    return em.opr_all(SVD, SVD.fields_for(p), inputs)


def _read_svd(g, opr, ins, _types):
    fields = opr.params[0][1] if opr.params else {}
    return list(g.add_node(get("svd"), ins, SVD.decode(fields)))


def _svd_vjp(V, inputs, outputs, grads, *, full_matrices):
    """MegEngine's SVD rule (Townsend's formula for A = U diag(s) Vh, thin factors):
    gA = U [F o (U^T gU - gU^T U) S + diag(gs) + S F o (V^T gV - gV^T V)] Vh
         + (I - U U^T) gU S^-1 Vh + U S^-1 gVh (I - V V^T),  F_ij = 1 / (s_j^2 - s_i^2).
    With full_matrices the extra columns of U / rows of Vh (an arbitrary basis) carry
    no gradient."""
    (a,), (u, s, vh), (gu, gs, gvh) = inputs, outputs, grads
    m, n = a.shape[-2:]
    k = min(m, n)
    nd = a.ndim
    last2 = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    T = lambda t: V.apply("transpose", t, pattern=last2)            # noqa: E731
    mm = lambda p, q: V.apply("matmul", p, q)                       # noqa: E731
    if full_matrices:
        u = V.apply("subtensor", u, index=((nd - 1, 0, k, None, None),))
        vh = V.apply("subtensor", vh, index=((nd - 2, 0, k, None, None),))
        if gu is not None:
            gu = V.apply("subtensor", gu, index=((nd - 1, 0, k, None, None),))
        if gvh is not None:
            gvh = V.apply("subtensor", gvh, index=((nd - 2, 0, k, None, None),))
    eye = V.const(np.eye(k), s)
    s_col = V.apply("expand_dims", s, axis=(nd - 2,))                 # (..., 1, k): s_j
    s_row = V.apply("expand_dims", s, axis=(nd - 1,))                 # (..., k, 1): s_i
    f = V.const(1 - np.eye(k), s) / (s_col * s_col - s_row * s_row + eye)
    inner = None

    def add(t):
        nonlocal inner
        inner = t if inner is None else inner + t
    if gs is not None:
        add(eye * V.apply("expand_dims", gs, axis=(nd - 1,)))
    if gu is not None:
        j = mm(T(u), gu)
        add(f * (j - T(j)) * s_col)
    if gvh is not None:
        v, gv = T(vh), T(gvh)
        kk = mm(T(v), gv)
        add(s_row * (f * (kk - T(kk))))
    ga = mm(mm(u, inner), vh)
    if gu is not None and m > k:
        ga = ga + mm((gu - mm(u, mm(T(u), gu))) / s_col, vh)
    if gvh is not None and n > k:
        ga = ga + mm(u / s_col, gvh - mm(mm(gvh, T(vh)), vh))
    return (ga,)


register(OpDef("svd", params={"full_matrices": False}, eager=_svd_eager, infer=_svd_infer,
               interpreted=True, mge=MgeComposite(_svd_emit), mge_read={"SVD": _read_svd},
               vjp=_svd_vjp))
