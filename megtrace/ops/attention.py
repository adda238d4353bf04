"""`multi_head_attn`: F.nn.multi_head_attention in eval mode (no bias_kv, no zero
attention, no dropout) as one op, written as MegEngine 1.13's MultiHeadAttn opr (MegEngine
dumps M.MultiHeadAttention so, and its Lite runs that opr on x86 through its proxy kernel).

Inputs are MegEngine's: query (N, L, Eq), key (N, S, Ek), value (N, S, Ev), the packed
`io_weight_bias` (1, total): the q, k, v, o weights ((in, proj) each, Y = X @ W), then the
biases the flags ask for, and, when `attn_mask_type` is not NO_MASK, the merged additive
mask: (L, S) or (N * num_heads, L, S) (MegEngine's layout check; other ranks broadcast
to the scores as its Elemwise ADD does). Heads split the projections into `num_heads`
consecutive chunks (a projection size of 0: no weight, every head sees the whole input;
an output size of 0: the merged heads are the result); the scores are scaled by
`sm_scaler`, then the mask is added
(DEFAULT_MASK, is_causal's hint, and USER_DEFINED_MASK compute alike), then softmax.
With `need_weights` the op has a second result, the softmax (N * num_heads, L, S): the
opr's second output (MegEngine's kernel always fills it; the flag says it is used).
Reading MegEngine's files goes through fbs/read_mha.py, which says which forms it takes.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from .registry import MgeComposite, MgeOpr, OpDef, register

_PARAMS = {"num_heads": 1, "qproj_size": 1, "kproj_size": 1, "vproj_size": 1, "oproj_size": 1,
           "qbias": False, "kbias": False, "vbias": False, "obias": False, "sm_scaler": 1.0,
           "attn_mask_type": "NO_MASK", "need_weights": False}
# MegEngine's AttnMaskType members that add the mask input to the scores
MASK_TYPES = ("DEFAULT_MASK", "USER_DEFINED_MASK")


def _sizes(p) -> list:
    return [p[f"{c}proj_size"] for c in "qkvo"]


def head_dims(dims, p) -> list:
    """Per-head feature counts of the query, key and value for input dims (Eq, Ek, Ev):
    a projection's share of the heads, or, with no projection (size 0), the whole input,
    which every head sees."""
    h = p["num_heads"]
    return [s // h if s else d for d, s in zip(dims, _sizes(p)[:3])]


def _layout(dims, p) -> list:
    """(offset, shape) of the eight parts of the packed buffer (None where absent: a
    projection of size 0 has no weight and no bias). The output weight's rows are the
    merged heads' features: vproj_size, or num_heads * Ev without a value projection."""
    sizes = _sizes(p)
    rows = list(dims[:3]) + [p["num_heads"] * head_dims(dims, p)[2]]
    shapes = [(d, s) if s else None for d, s in zip(rows, sizes)]
    shapes += [(s,) if s and p[f"{c}bias"] else None for c, s in zip("qkvo", sizes)]
    out, at = [], 0
    for shape in shapes:
        if shape is None:
            out.append(None)
            continue
        out.append((at, shape))
        at += int(np.prod(shape))
    return out + [at]


def packed_size(dims, p) -> int:
    """io_weight_bias' element count for input dims (Eq, Ek, Ev) and params `p`
    (F.nn.multi_head_attention's test for the one-op form)."""
    return _layout(dims, p)[-1]


def unpack(w, dims, p) -> list:
    """The eight parts of io_weight_bias `w` (a Tensor or a NumPy array; None where
    absent) for input dims (Eq, Ek, Ev), in MegEngine's order."""
    flat = w.reshape(-1)
    return [None if e is None else flat[e[0]:e[0] + int(np.prod(e[1]))].reshape(e[1])
            for e in _layout(dims, p)[:-1]]


def _infer(q, k, v, w, mask=None, **p):
    for t in (q, k, v, w) + (() if mask is None else (mask,)):
        if t.dtype != "float32":
            raise DTypeError(f"multi_head_attn: inputs must be float32; got {t}")
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3 or k.shape[:2] != v.shape[:2] or \
            q.shape[0] != k.shape[0]:
        raise ShapeError(f"multi_head_attn: expected query (N, L, E), key and value "
                         f"(N, S, E); got {q}, {k}, {v}")
    h = p["num_heads"]
    dims = (q.shape[2], k.shape[2], v.shape[2])
    per_head = head_dims(dims, p)
    if any(s % h for s in _sizes(p)[:3]) or per_head[0] != per_head[1]:
        raise ShapeError(f"multi_head_attn: projection sizes {p['qproj_size']}, "
                         f"{p['kproj_size']}, {p['vproj_size']} do not split into {h} heads "
                         f"with as many query as key features per head (inputs {dims})")
    for c in "qkvo":
        if p[f"{c}bias"] and not p[f"{c}proj_size"]:
            raise ShapeError(f"multi_head_attn: {c}bias needs a {c} projection "
                             f"({c}proj_size > 0)")
    total = packed_size(dims, p)
    if w.shape != (1, total):
        raise ShapeError(f"multi_head_attn: io_weight_bias must be (1, {total}); got {w}")
    scores = (q.shape[0] * h, q.shape[1], k.shape[1])
    _check_mask(mask, scores, p["attn_mask_type"])
    width = p["oproj_size"] or h * per_head[2]
    out = TensorType((q.shape[0], q.shape[1], width), "float32")
    return (out, TensorType(scores, "float32")) if p["need_weights"] else out


def _check_mask(mask, scores: tuple, mask_type: str) -> None:
    """MegEngine's rule for the mask input: present exactly when attn_mask_type adds it;
    (L, S) when 2-d, (N * num_heads, L, S) when 3-d, otherwise broadcast to the scores
    (N * num_heads, L, S) without changing their shape."""
    if mask_type not in ("NO_MASK",) + MASK_TYPES:
        raise ValueError(f"multi_head_attn: attn_mask_type {mask_type!r} is not one of "
                         f"NO_MASK, {', '.join(MASK_TYPES)}")
    if (mask is None) != (mask_type == "NO_MASK"):
        raise ShapeError(f"multi_head_attn: attn_mask_type={mask_type} "
                         f"{'needs' if mask is None else 'takes no'} mask input")
    if mask is None:
        return
    shape = tuple(mask.shape)
    want = {2: scores[1:], 3: scores}.get(len(shape))
    if want is not None:
        fits = shape == want
    else:
        fits = len(shape) < 2 and all(d in (1, s) for d, s in zip(shape[::-1], scores[::-1]))
    if not fits:
        raise ShapeError(f"multi_head_attn: attn_mask.shape should be "
                         f"{list(want or scores)}, but got {list(shape)}")


# -- one computation for NumPy and Relax ------------------------------------------------------
def _compute(ops, q, k, v, w, mask, shapes, p):
    n, length, source = shapes[0][0], shapes[0][1], shapes[1][1]
    h = p["num_heads"]
    dims = (shapes[0][2], shapes[1][2], shapes[2][2])
    layout = _layout(dims, p)[:-1]
    per_head = head_dims(dims, p)
    flat = ops.reshape(w, (-1,))
    parts = [None if e is None else ops.piece(flat, e[0], e[1]) for e in layout]

    def project(x, t, wt, b):
        y = ops.matmul(ops.reshape(x, (n * t, wt[1])), parts[wt[0]])
        if b is not None:
            y = ops.add(y, parts[b])
        return y

    def to_heads(i, x, t):
        """(N * h, t, per-head features): the projection's chunks, or, with no
        projection, the input repeated for every head."""
        if not sizes[i]:
            x = ops.broadcast_to(ops.reshape(x, (n, 1, t, dims[i])), (n, h, t, dims[i]))
            return ops.reshape(x, (n * h, t, dims[i]))
        y = project(x, t, (i, dims[i]), 4 + i if p["qkv"[i] + "bias"] else None)
        y = ops.transpose(ops.reshape(y, (n, t, h, per_head[i])), (0, 2, 1, 3))
        return ops.reshape(y, (n * h, t, per_head[i]))
    sizes = _sizes(p)
    qh, kh, vh = to_heads(0, q, length), to_heads(1, k, source), to_heads(2, v, source)
    scores = ops.scale(ops.matmul(qh, ops.transpose(kh, (0, 2, 1))), p["sm_scaler"])
    probs = ops.softmax(scores if mask is None else ops.add(scores, mask))
    heads = ops.matmul(probs, vh)
    width = h * per_head[2]
    merged = ops.reshape(ops.transpose(ops.reshape(heads, (n, h, length, per_head[2])),
                                       (0, 2, 1, 3)), (n, length, width))
    if sizes[3]:
        out = project(merged, length, (3, width), 7 if p["obias"] else None)
        out = ops.reshape(out, (n, length, sizes[3]))
    else:
        out = merged
    return (out, probs) if p["need_weights"] else out


class _NumPy:
    reshape = staticmethod(lambda a, s: a.reshape(s))
    broadcast_to = staticmethod(np.broadcast_to)
    piece = staticmethod(lambda f, at, s: f[at:at + int(np.prod(s))].reshape(s))
    matmul = staticmethod(np.matmul)
    add = staticmethod(np.add)
    transpose = staticmethod(np.transpose)
    scale = staticmethod(lambda a, c: a * np.float32(c))

    @staticmethod
    def softmax(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


class _Relax:
    def __init__(self, L):
        self.R, self.L = L.R, L

    def reshape(self, a, s):
        return self.R.reshape(a, s)

    def broadcast_to(self, a, s):
        return self.R.broadcast_to(a, s)

    def piece(self, f, at, s):
        n = int(np.prod(s))
        return self.R.reshape(self.R.strided_slice(f, axes=[0], begin=[at], end=[at + n]), s)

    def matmul(self, a, b):
        return self.R.matmul(a, b)

    def add(self, a, b):
        return self.R.add(a, b)

    def transpose(self, a, perm):
        return self.R.permute_dims(a, list(perm))

    def scale(self, a, c):
        return self.R.multiply(a, self.L.const(c, "float32"))

    def softmax(self, a):
        return self.R.nn.softmax(a, axis=-1)


def _eager(q, k, v, w, mask=None, **p):
    out = _compute(_NumPy, q, k, v, w, mask, [q.shape, k.shape, v.shape], p)
    return tuple(a.astype(q.dtype) for a in out) if p["need_weights"] else out.astype(q.dtype)


def _lower(L, q, k, v, w, mask=None, **p):
    return _compute(_Relax(L), q, k, v, w, mask, [t.shape for t in L.types[:3]], p)


def _vjp(V, inputs, outputs, grads, **p):
    """Recompute the forward in Tensor ops, then walk it back by hand."""
    from .attention_vjp import attention_vjp
    return attention_vjp(V, inputs, outputs, grads, p)


def _fields(p: dict) -> dict:
    masked = p["attn_mask_type"] != "NO_MASK"
    return {**{k: p[k] for k in _PARAMS}, "training": False,
            "tensor_combination_type": "ONLY_MASK" if masked else "NONE"}


MULTI_HEAD_ATTN = MgeOpr("MultiHeadAttn", "MultiHeadAttn", outputs=4, fields=_fields,
                         decode=lambda f: {k: f[k] for k in _PARAMS})


def _emit(em, types, p, inputs):
    fields = {**_fields(p), "embeding_size": types[0].shape[2], "k_size": types[1].shape[2],
              "v_size": types[2].shape[2]}
    outs = em.opr_all(MULTI_HEAD_ATTN, fields, inputs)
    return outs[:2] if p["need_weights"] else outs[0]


register(OpDef("multi_head_attn", eager=_eager, infer=_infer, lower=_lower, params=_PARAMS,
               mge=MgeComposite(_emit), opaque_in_optimize=True, vjp=_vjp))
