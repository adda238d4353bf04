"""Fake quantization (MegEngine's FakeQuant, TQT and LSQ oprs) for quantization-aware
training: values are snapped to the grid of an integer dtype and mapped back to float.

Each forward is MegEngine's kernel, step for step, in the input's float dtype (C `round`
rounds halves away from zero). The gradients are MegEngine's straight-through rules
(FakeQuantBackward, TQTBackward, LSQBackward). In a .mge file each op is written as the
chain of Elemwise oprs computing its forward (a runtime computes the same values); the
FakeQuant/TQT/LSQ oprs of MegEngine's QAT dumps are read back as these ops.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from ._rules import broadcast_shapes
from .registry import MgeComposite, MgeOpr, OpDef, get, register
from .rounding import lower_round_half_away, round_half_away

ELEMWISE = MgeOpr("Elemwise", "Elemwise")
_LN2 = math.log(2.0)


def _check_float(op: str, *types: TensorType) -> None:
    for t in types:
        if t.dtype not in ("float32", "float16"):
            raise DTypeError(f"{op}: expected float inputs; got {t}")


def _infer(op: str):
    """The result has x's shape and dtype; the other inputs must broadcast to it."""
    def infer(x, *others, qmin, qmax):
        _check_float(op, x, *others)
        for t in others:
            if broadcast_shapes(op, x.shape, t.shape) != tuple(x.shape):
                raise ShapeError(f"{op}: {t} does not broadcast to the input {x}")
        if qmin > qmax:
            raise ValueError(f"{op}: qmin {qmin} is greater than qmax {qmax}")
        return TensorType(tuple(x.shape), x.dtype)
    return infer


_PARAMS = {"qmin": -2147483648, "qmax": 2147483647}


def _clip_np(v, qmin, qmax):
    v = np.where(v <= qmin, np.asarray(qmin, v.dtype), v)
    return np.where(v >= qmax, np.asarray(qmax, v.dtype), v)


def _reader(op: str):
    """Reads MegEngine's opr of the same name (inputs in our order, params qmin/qmax)."""
    def read(g, opr, ins, _shapes):
        fields = opr.params[0][1] if opr.params else {}
        params = {k: int(fields.get(k, default)) for k, default in _PARAMS.items()}
        outs = list(g.add_node(get(op), ins, params, name_hint=opr.name or opr.type))
        return outs + [None] * (len(opr.outputs) - len(outs))
    return read


def _emit_tools(em, types):
    dtype = types[0].dtype

    def e(mode, *inputs):
        return em.opr(ELEMWISE, {"mode": mode}, list(inputs))

    def c(value):
        return em.const(np.array([value], dtype))
    return e, c


# -- fake_quant(x, scale, zero_point): (clip(round(x / s) + zp) - zp) * s -----------------
def _fq_eager(x, scale, zp, *, qmin, qmax):
    q = _clip_np(round_half_away(x / scale) + zp, qmin, qmax)
    return ((q - zp) * scale).astype(x.dtype)


def _fq_lower(L, x, scale, zp, *, qmin, qmax):
    R = L.R
    q = R.add(lower_round_half_away(L, R.divide(x, scale)), zp)
    q = R.clip(q, float(qmin), float(qmax))
    return R.multiply(R.subtract(q, zp), scale)


def _fq_emit(em, types, p, inputs):
    e, c = _emit_tools(em, types)
    x, scale, zp = inputs
    q = e("ADD", e("ROUND", e("TRUE_DIV", x, scale)), zp)
    q = e("MIN_", e("MAX_", q, c(p["qmin"])), c(p["qmax"]))
    return e("MUL", e("SUB", q, zp), scale)


def _fq_vjp(V, inputs, outputs, grads, *, qmin, qmax):
    x, scale, zp = inputs
    F = V.F
    q = F.round(x / scale) + zp
    inside = F.logical_and(q >= qmin, q <= qmax)
    return V.select(inside, grads[0]), None, None


register(OpDef("fake_quant", eager=_fq_eager, infer=_infer("fake_quant"), lower=_fq_lower,
               mge=MgeComposite(_fq_emit), params=_PARAMS,
               mge_read={"FakeQuant": _reader("fake_quant")}, vjp=_fq_vjp))


# -- tqt(x, log2_scale): clip(round(x / 2^s)) * 2^s (trained quantization thresholds) -----
def _tqt_eager(x, scale, *, qmin, qmax):
    t = np.power(np.asarray(2.0, x.dtype), scale).astype(x.dtype)
    return (_clip_np(round_half_away(x / t), qmin, qmax) * t).astype(x.dtype)


def _tqt_lower(L, x, scale, *, qmin, qmax):
    R = L.R
    t = R.power(L.const(2.0, L.out.dtype), scale)
    q = R.clip(lower_round_half_away(L, R.divide(x, t)), float(qmin), float(qmax))
    return R.multiply(q, t)


def _tqt_emit(em, types, p, inputs):
    e, c = _emit_tools(em, types)
    x, scale = inputs
    t = e("POW", c(2.0), scale)
    q = e("MIN_", e("MAX_", e("ROUND", e("TRUE_DIV", x, t)), c(p["qmin"])), c(p["qmax"]))
    return e("MUL", q, t)


def _tqt_vjp(V, inputs, outputs, grads, *, qmin, qmax):
    x, scale = inputs
    F, g = V.F, grads[0]
    t = F.pow(V.const(2.0, x), scale)
    scaled = x / t
    rounded = F.clip(F.round(scaled), qmin, qmax)
    clipped = F.logical_or(scaled < qmin - 0.5, scaled > qmax + 0.5)
    gx = V.select(F.logical_not(clipped), g)
    gs = None
    if V.needs_grad(1):
        per_elem = V.select(clipped, rounded, rounded - scaled) * t * _LN2 * g
        gs = V.sum_to(per_elem, scale.shape)
    return gx, gs


register(OpDef("tqt", eager=_tqt_eager, infer=_infer("tqt"), lower=_tqt_lower,
               mge=MgeComposite(_tqt_emit), params=_PARAMS,
               mge_read={"TQT": _reader("tqt")}, vjp=_tqt_vjp))


# -- lsq(x, step, zero_point, grad_scale): (round(clip(x / s + zp)) - zp) * s -------------
def _lsq_eager(x, scale, zp, grad_scale, *, qmin, qmax):
    q = round_half_away(_clip_np(x / scale + zp, qmin, qmax))
    return ((q - zp) * scale).astype(x.dtype)


def _lsq_lower(L, x, scale, zp, grad_scale, *, qmin, qmax):
    R = L.R
    q = R.clip(R.add(R.divide(x, scale), zp), float(qmin), float(qmax))
    return R.multiply(R.subtract(lower_round_half_away(L, q), zp), scale)


def _lsq_emit(em, types, p, inputs):
    e, c = _emit_tools(em, types)
    x, scale, zp, _grad_scale = inputs
    q = e("ADD", e("TRUE_DIV", x, scale), zp)
    q = e("ROUND", e("MIN_", e("MAX_", q, c(p["qmin"])), c(p["qmax"])))
    return e("MUL", e("SUB", q, zp), scale)


def _lsq_vjp(V, inputs, outputs, grads, *, qmin, qmax):
    x, scale, zp, grad_scale = inputs
    F, g = V.F, grads[0]
    v = x / scale + zp
    small, big = v < qmin, v > qmax
    middle = F.logical_not(F.logical_or(small, big))
    gx = V.select(middle, g)
    gs = None
    if V.needs_grad(1):
        flt = x.dtype
        per_elem = (small.astype(flt) * qmin + big.astype(flt) * qmax
                    + middle.astype(flt) * (F.round(v) - v)) * grad_scale * g
        gs = V.sum_to(per_elem, scale.shape)
    return gx, gs, None, None


register(OpDef("lsq", eager=_lsq_eager, infer=_infer("lsq"), lower=_lsq_lower,
               mge=MgeComposite(_lsq_emit), params=_PARAMS,
               mge_read={"LSQ": _reader("lsq")}, vjp=_lsq_vjp))
