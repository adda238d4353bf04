"""Reading MegEngine 1.13's MultiHeadAttn opr (how it dumps M.MultiHeadAttention and
F.nn.multi_head_attention) as megtrace ops: projections, per-head scaled scores, softmax
and the output projection, the computation megtrace's F.nn.multi_head_attention does
(checked against MegEngine's CPU kernel: tests/data/make_megengine_mha.py).

The packed `io_weight_bias` must be a constant of the file (it is a Parameter, dumped
as one); its parts are, in order, the q, k, v, o weights ((in, proj) each, Y = X @ W)
and the biases the flags ask for. Masks, bias_kv, zero attention, the residual link
and dropout in training are refused.
"""
from __future__ import annotations

import numpy as np

from megtrace.errors import FormatError, UnsupportedModelError
from megtrace.ops import get

from .to_graph import rule

_REFUSED = {"tensor_combination_type": "NONE", "attn_mask_type": "NO_MASK",
            "add_zero_attn": False, "reslink": False, "input_order": 0}


def _check(opr, f: dict) -> None:
    for name, ok in _REFUSED.items():
        if f.get(name, ok) != ok:
            raise UnsupportedModelError(f"MultiHeadAttn: {name}={f[name]!r} is not supported "
                                        f"(megtrace reads {name}={ok!r})")
    if f.get("training") and (f.get("attn_prob") or f.get("out_prob")):
        raise UnsupportedModelError("MultiHeadAttn: dropout in training mode is not supported")
    if any(not f.get(f"{p}proj_size") for p in "qkvo"):
        raise UnsupportedModelError("MultiHeadAttn: a projection size of 0 (no projection) "
                                    "is not supported")


def _parts(packed: np.ndarray, f: dict, dims: tuple[int, int, int, int]) -> list:
    sizes = [int(f[f"{p}proj_size"]) for p in "qkvo"]
    shapes = [(d, s) for d, s in zip(dims, sizes)]
    shapes += [(s,) if f.get(f"{p}bias") else None for p, s in zip("qkvo", sizes)]
    flat = packed.reshape(-1)
    need = sum(int(np.prod(s)) for s in shapes if s is not None)
    if flat.size != need:
        raise FormatError(f"MultiHeadAttn: io_weight_bias has {flat.size} elements, its "
                          f"params need {need}")
    out, at = [], 0
    for shape in shapes:
        if shape is None:
            out.append(None)
            continue
        n = int(np.prod(shape))
        out.append(flat[at:at + n].reshape(shape))
        at += n
    return out


@rule("MultiHeadAttn")
def _mha(g, opr, ins, _shapes):
    f = opr.params[0][1] if opr.params else {}
    _check(opr, f)
    if len(ins) != 4:
        raise FormatError(f"MultiHeadAttn: expected 4 inputs, got {len(ins)}")
    query, key, value, packed = ins
    if packed not in g.consts:
        raise UnsupportedModelError("MultiHeadAttn: io_weight_bias must be a constant")
    hint = opr.name or opr.type
    heads = int(f["num_heads"])

    def node(op, inputs, **params):
        return g.add_node(get(op), inputs, params, name_hint=hint)[0]

    def const(a):
        return g.add_const(np.ascontiguousarray(a, np.float32))

    def project(x, w, b):
        n, t, e = x.type.shape
        y = node("matmul", [node("reshape", [x], shape=(n * t, e)), const(w)])
        if b is not None:
            y = node("add", [y, const(b)])
        return node("reshape", [y], shape=(n, t, w.shape[1]))

    def split_heads(x):
        n, t, p = x.type.shape
        x = node("reshape", [x], shape=(n, t, heads, p // heads))
        return node("reshape", [node("transpose", [x], pattern=(0, 2, 1, 3))],
                    shape=(n * heads, t, p // heads))

    dims = (query.type.shape[2], key.type.shape[2], value.type.shape[2], int(f["vproj_size"]))
    qw, kw, vw, ow, qb, kb, vb, ob = _parts(np.asarray(g.consts[packed]), f, dims)
    q, k, v = (split_heads(project(x, w, b)) for x, w, b in
               ((query, qw, qb), (key, kw, kb), (value, vw, vb)))
    scores = node("mul", [node("matmul", [q, k], transpose_b=True),
                          const(np.float32(f.get("sm_scaler", 1.0)))])
    weights = node("softmax", [scores], axis=-1)
    n, length = query.type.shape[:2]
    merged = node("matmul", [weights, v])
    merged = node("transpose", [node("reshape", [merged], shape=(n, heads, length, -1))],
                  pattern=(0, 2, 1, 3))
    merged = node("reshape", [merged], shape=(n, length, int(f["vproj_size"])))
    out = project(merged, ow, ob)
    return [out, weights if f.get("need_weights") else None] + [None] * (len(opr.outputs) - 2)
