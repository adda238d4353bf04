"""`rng_permutation` and `rng_shuffle`: random orders drawn like megtrace.random's other
ops (a key input, ops/random.py's hash of (key, index)), written and read as MegEngine
1.13's PermutationRNG and ShuffleRNG oprs, as MegEngine dumps F.random.permutation(n)
and permutation(tensor) / shuffle.

The order is the ascending sort of one 32-bit hash per position, ties broken by the
position (the sort key is hash * n + position, unique), so NumPy and the Relax lowering
give the same permutation for the same key. In a .mge file the oprs carry the seed and
MegEngine's runtime draws its own orders.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, FormatError
from ..ir import TensorType
from .random import _bits_np, _bits_rx, _fields, _key_input, _key_type
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, register
from .registry import get as get_op

_DTYPES = {"int32": "Int32", "int16": "Int16", "float32": "Float32"}


def _order_np(key, n: int) -> np.ndarray:
    index = np.arange(n, dtype=np.uint32)
    sort_key = _bits_np(key, index).astype(np.int64) * n + index.astype(np.int64)
    return np.argsort(sort_key, kind="stable").astype(np.int32)


def _order_rx(L, key, n: int):
    R = L.R
    index = R.arange(0, n, 1, dtype="uint32")
    bits = R.astype(_bits_rx(L, key, index), "int64")
    sort_key = R.add(R.multiply(bits, L.const(n, "int64")), R.astype(index, "int64"))
    return R.argsort(sort_key, axis=0, descending=False, dtype="int32")


# -- permutation of range(n) ----------------------------------------------------------------
def _perm_infer(key, *, n, dtype, seed):
    _key_type("rng_permutation", key)
    if dtype not in _DTYPES:
        raise DTypeError(f"rng_permutation: dtype must be one of {sorted(_DTYPES)}; got "
                         f"{dtype!r}")
    if n < 1:
        raise ValueError(f"rng_permutation: n must be positive; got {n}")
    return TensorType((n,), dtype)


def _perm_np(key, *, n, dtype, seed):
    return _order_np(key, n).astype(dtype)


def _perm_rx(L, key, *, n, dtype, seed):
    return L.R.astype(_order_rx(L, key, n), dtype)


PERMUTATION_RNG = MgeOpr("PermutationRNG", "PermutationRNG")


def _perm_emit(em, types, p, inputs):
    n = em.const(np.array([p["n"]], np.int32))
    return em.opr(PERMUTATION_RNG, {"seed": p["seed"], "dtype": _DTYPES[p["dtype"]]}, [n])


def _perm_read(g, opr, ins, _shapes):
    f = _fields(opr)
    dtype = {v: k for k, v in _DTYPES.items()}.get(f.get("dtype", "Int32"))
    if dtype is None:
        raise FormatError(f"PermutationRNG: dtype {f['dtype']} is not one MegEngine draws")
    n = g.consts.get(ins[0]) if len(ins) == 1 else None
    if n is None or np.asarray(n).size != 1:
        raise FormatError("PermutationRNG: the length must be one constant input")
    return list(g.add_node(get_op("rng_permutation"), [_key_input(g, opr)],
                           {"n": int(np.asarray(n).reshape(-1)[0]), "dtype": dtype,
                            "seed": int(f.get("seed", 0))}, name_hint=opr.name or opr.type))


register(OpDef("rng_permutation", eager=_perm_np, infer=_perm_infer, lower=_perm_rx,
               params={"n": 1, "dtype": "int32", "seed": 0}, mge=MgeComposite(_perm_emit),
               mge_read={"PermutationRNG": _perm_read}, vjp=NOT_DIFFERENTIABLE, random=True))


# -- shuffle along the first axis -----------------------------------------------------------
def _shuffle_infer(key, x, *, seed):
    _key_type("rng_shuffle", key)
    if x.ndim == 0 or x.shape[0] == 0:
        raise ValueError(f"rng_shuffle: the input needs a non-empty first axis; got {x}")
    return x, TensorType((x.shape[0],), "int32")


def _shuffle_np(key, x, *, seed):
    order = _order_np(key, x.shape[0])
    return x[order], order


def _shuffle_rx(L, key, x, *, seed):
    order = L.normalize(_order_rx(L, key, L.types[1].shape[0]))
    return [L.R.take(x, order, axis=0), order]


def _shuffle_vjp(V, inputs, outputs, grads, *, seed):
    """MegEngine's ShuffleRNGBackward: each row's gradient goes back to where it came
    from."""
    x, (_, order), g = inputs[1], outputs, grads[0]
    if g is None:
        return None, None
    return None, V.apply("indexing_incr_multi_axis_vec", V.zeros_like(x), g, order, axes=(0,))


SHUFFLE_RNG = MgeOpr("ShuffleRNG", "ShuffleRNG", outputs=2, results=(0, 1))


def _shuffle_emit(em, types, p, inputs):
    return em.opr_all(SHUFFLE_RNG, {"seed": p["seed"]}, [inputs[1]])


def _shuffle_read(g, opr, ins, _shapes):
    if len(ins) != 1:
        raise FormatError(f"ShuffleRNG: expected 1 input, got {len(ins)}")
    return list(g.add_node(get_op("rng_shuffle"), [_key_input(g, opr), ins[0]],
                           {"seed": int(_fields(opr).get("seed", 0))},
                           name_hint=opr.name or opr.type))


register(OpDef("rng_shuffle", eager=_shuffle_np, infer=_shuffle_infer, lower=_shuffle_rx,
               params={"seed": 0}, mge=MgeComposite(_shuffle_emit),
               mge_read={"ShuffleRNG": _shuffle_read}, vjp=_shuffle_vjp, random=True))
