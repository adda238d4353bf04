"""`rng_dropout`: F.nn.dropout's mask and scaling as one random op with its own generator
(MegEngine 1.13's Dropout opr: eager dropout draws from a stream of its own, which
uniform draws do not advance; checked in its chroot), written and read as that opr.

Element i is kept when its uniform draw (rng_uniform's, ops/random.py: the hash of
(key, i), top 24 bits) is >= drop_prob, and scaled by 1 / (1 - drop_prob). MegEngine's
opr has a second output, the mask its backward reads; the VJP here redraws the same mask
from the same key.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, FormatError
from ..ir import TensorType
from .random import _fields, _key_input, _key_type, _uniform_np, _uniform_rx
from .registry import MgeComposite, MgeOpr, OpDef, register
from .registry import get as get_op


def _infer(key, x, *, drop_prob, seed):
    _key_type("rng_dropout", key)
    if x.dtype != "float32":
        raise DTypeError(f"rng_dropout: the input must be float32; got {x}")
    if not 0 <= drop_prob < 1:
        raise ValueError(f"rng_dropout: drop_prob must be in [0, 1); got {drop_prob}")
    return TensorType(x.shape, x.dtype)


def _eager(key, x, *, drop_prob, seed):
    keep = _uniform_np(key, shape=x.shape, seed=seed) >= np.float32(drop_prob)
    return np.where(keep, x * np.float32(1.0 / (1.0 - drop_prob)), np.float32(0)).astype(x.dtype)


def _lower(L, key, x, *, drop_prob, seed):
    R = L.R
    u = _uniform_rx(L, key, shape=L.types[1].shape, seed=seed)
    scaled = R.multiply(x, L.const(1.0 / (1.0 - drop_prob), "float32"))
    return R.where(R.greater_equal(u, L.const(drop_prob, "float32")), scaled,
                   L.const(0.0, "float32"))


def _vjp(V, inputs, outputs, grads, *, drop_prob, seed):
    """The same key redraws the mask: the gradient is g * keep / (1 - p)."""
    key, x = inputs
    scale = V.apply("rng_dropout", key, V.apply("broadcast_to", V.const(1, x),
                                                shape=tuple(x.shape)),
                    drop_prob=drop_prob, seed=seed)
    return None, grads[0] * scale


DROPOUT = MgeOpr("Dropout", "Dropout", outputs=2)     # (output, mask)


def _emit(em, types, p, inputs):
    return em.opr(DROPOUT, {"drop_prob": p["drop_prob"], "seed": p["seed"]}, [inputs[1]])


def _read(g, opr, ins, _shapes):
    if len(ins) != 1:
        raise FormatError(f"Dropout: expected 1 input, got {len(ins)}")
    f = _fields(opr)
    (y,) = g.add_node(get_op("rng_dropout"), [_key_input(g, opr), ins[0]],
                      {"drop_prob": float(f.get("drop_prob", 0.0)),
                       "seed": int(f.get("seed", 0))}, name_hint=opr.name or opr.type)
    return [y] + [None] * (len(opr.outputs) - 1)


register(OpDef("rng_dropout", eager=_eager, infer=_infer, lower=_lower,
               params={"drop_prob": 0.5, "seed": 0}, mge=MgeComposite(_emit),
               mge_read={"Dropout": _read}, vjp=_vjp, random=True))
