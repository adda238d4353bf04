"""The Relax pass that gives generic kernels fast_math's exp / erf / tanh / sigmoid.

Before legalization, each float32 call of exp, erf, tanh, sigmoid, nn.gelu, nn.silu and
nn.softmax becomes a TE function built on fast_math's expressions (the softmax as max,
exp of the difference, sum, division), and softmax / layer_norm over a last axis of 16 q
take rowwise.py's lane-partial reductions; everything else is left for LegalizeOps. The rule
kernels' epilogues take the same expressions directly (epilogue.py).
"""
from __future__ import annotations

from typing import Any

from .._tvm import relax, tvm
from . import fast_math
from .rowwise import lane_reducible, layer_norm_last, softmax_last

_UNARY = {"relax.exp": "exp", "relax.erf": "erf", "relax.tanh": "tanh",
          "relax.sigmoid": "sigmoid", "relax.nn.gelu": "gelu"}


def _elementwise(x, fn):
    te = tvm().te
    return te.compute(x.shape, lambda *i: fn(x(*i)), name="fast_math")


def _silu(x):
    te = tvm().te
    return te.compute(x.shape, lambda *i: x(*i) * fast_math.fast_sigmoid(x(*i)), name="silu")


def softmax_te(x, axis: int):
    """softmax along `axis` with fast_math's exp (the max subtracted first)."""
    te, topi = tvm().te, tvm().topi
    axis = axis % len(x.shape)
    peak = topi.max(x, axis=axis, keepdims=True)

    def at(t, i):
        return t(*i[:axis], 0, *i[axis + 1:])
    e = te.compute(x.shape, lambda *i: fast_math.fast_exp(x(*i) - at(peak, i)), name="sm_exp")
    total = topi.sum(e, axis=axis, keepdims=True)
    return te.compute(x.shape, lambda *i: e(*i) / at(total, i), name="sm_norm")


def _is_float32(expr: Any) -> bool:
    ty = getattr(expr, "ty", None)
    return hasattr(ty, "shape") and str(getattr(ty, "dtype", "")) == "float32"


def _last_axis_only(call) -> bool:
    """A layer_norm over the last axis alone, with scale and centre, rows of 16 q."""
    nd = len(call.args[0].ty.shape)
    axes = [int(a) % nd for a in call.attrs.axes]
    return axes == [nd - 1] and bool(call.attrs.center) and bool(call.attrs.scale) \
        and lane_reducible(call.args[0].ty.shape, -1)


def _mutator():
    rx = relax()

    @rx.expr_functor.mutator
    class FastMathMutator(rx.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            op = getattr(call.op, "name", None)
            if not isinstance(call.op, tvm().ir.Op) or not call.args \
                    or not _is_float32(call.args[0]):
                return call
            x = call.args[0]
            if op in _UNARY:
                fn = fast_math.FAST[_UNARY[op]]
                return self.builder_.call_te(lambda t: _elementwise(t, fn), x,
                                             primfunc_name_hint=f"fast_{_UNARY[op]}")
            if op == "relax.nn.silu":
                return self.builder_.call_te(_silu, x, primfunc_name_hint="fast_silu")
            if op == "relax.nn.softmax":
                axis = int(call.attrs.axis)
                if lane_reducible(x.ty.shape, axis):
                    return self.builder_.call_te(softmax_last, x, primfunc_name_hint="softmax")
                return self.builder_.call_te(softmax_te, x, axis, primfunc_name_hint="softmax")
            if op == "relax.nn.layer_norm" and _last_axis_only(call) \
                    and all(_is_float32(a) for a in call.args[1:3]):
                return self.builder_.call_te(layer_norm_last, x, call.args[1], call.args[2],
                                             float(call.attrs.epsilon),
                                             primfunc_name_hint="layer_norm")
            return call
    return FastMathMutator


def fast_math_pass():
    """A module pass (identity when MEGTRACE_FAST_MATH is off: the rowwise softmax and
    layer_norm too, so that switch gives TVM's own legalization back)."""
    t, rx = tvm(), relax()

    @t.transform.module_pass(opt_level=0, name="MegtraceFastMath")
    def _pass(mod, _ctx):
        if not fast_math.enabled():
            return mod
        mutator = _mutator()(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, rx.Function):
                mutator.builder_.update_func(gv, mutator.visit_expr(func))
        return mutator.builder_.get()
    return _pass
