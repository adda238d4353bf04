"""Gradient rules (`OpDef.vjp`) of the elementwise ops, as MegEngine 1.13 differentiates
its Elemwise modes (src/opr/impl/basic_arith.cpp): same formulas, same tie-breaking for
max/min, no gradient (None) through floor/ceil/round/floor_div.

Every rule sees (V, x.., y, g) and returns full-shape gradients; `_elementwise` reduces
them back to each input's shape (broadcasting) as MegEngine does.
"""
from __future__ import annotations

import math

_SQRT_2PI = math.sqrt(2 * math.pi)


def _c(V, value, like):
    return V.const(value, like)


def _cmp(V, name, a, b):
    return V.apply(name, a, b)


def _unary(rule):
    def vjp(V, inputs, outputs, grads):
        (x,), (y,), (g,) = inputs, outputs, grads
        return (rule(V, x, y, g),)
    return vjp


def _elementwise(rule):
    """A rule (V, *inputs, y, g) -> per-input full-shape gradients, summed to the shapes."""
    def vjp(V, inputs, outputs, grads):
        got = rule(V, *inputs, outputs[0], grads[0])
        return tuple(None if d is None else V.sum_to(V.cast(d, x), tuple(x.shape))
                     for d, x in zip(got, inputs))
    return vjp


def _no_grad(V, x, y, g):
    return None


def _relu(V, x, y, g):
    return V.select(_cmp(V, "gt", y, _c(V, 0, y)), g)


def _abs(V, x, y, g):
    """MegEngine's ABS_GRAD, `x > 0 ? g : -g`: at 0 the gradient is -g, not sign's 0."""
    return V.select(_cmp(V, "gt", x, _c(V, 0, x)), g, V.apply("neg", g))


def _between(V, x, lo, hi, strict=True):
    name = "lt" if strict else "le"
    return V.apply("logical_and", _cmp(V, name, _c(V, lo, x), x), _cmp(V, name, x, _c(V, hi, x)))


def _sigmoid_of(V, x):
    return V.apply("sigmoid", x)


def _silu(V, x, y, g):
    s = _sigmoid_of(V, x)
    return g * s * (_c(V, 1, x) + x * (_c(V, 1, x) - s))


def _gelu(V, x, y, g):
    cdf = _c(V, 0.5, x) * (_c(V, 1, x) + V.apply("erf", x * _c(V, 1 / math.sqrt(2), x)))
    pdf = V.apply("exp", x * x * _c(V, -0.5, x)) * _c(V, 1 / _SQRT_2PI, x)
    return g * (cdf + x * pdf)


def _hswish(V, x, y, g):
    inner = g * (x * _c(V, 2, x) + _c(V, 3, x)) * _c(V, 1 / 6, x)
    above = V.select(_cmp(V, "gt", x, _c(V, 3, x)), g, inner)
    return V.select(_cmp(V, "lt", x, _c(V, -3, x)), V.zeros_like(g), above)


def _fast_tanh(V, x, y, g):
    """MegEngine's FAST_TANH_GRAD: ((-48 x^2) / (3 + x^2) + 27 + x^2) / ((3 + x^2) * 9)."""
    x2 = x * x
    deno = _c(V, 3, x) + x2
    return (_c(V, -48, x) * x2 / deno + _c(V, 27, x) + x2) / (deno * _c(V, 9, x)) * g


UNARY_VJPS = {
    "relu": _relu,
    "sigmoid": lambda V, x, y, g: g * y * (_c(V, 1, y) - y),
    "tanh": lambda V, x, y, g: g * (_c(V, 1, y) - y * y),
    "exp": lambda V, x, y, g: g * y,
    "log": lambda V, x, y, g: g / x,
    "neg": lambda V, x, y, g: V.apply("neg", g),
    "abs": _abs,
    "floor": _no_grad,
    "ceil": _no_grad,
    "round": _no_grad,
    "sin": lambda V, x, y, g: g * V.apply("cos", x),
    "cos": lambda V, x, y, g: V.apply("neg", g * V.apply("sin", x)),
    "sqrt": lambda V, x, y, g: g / y * _c(V, 0.5, y),
    "square": lambda V, x, y, g: g * _c(V, 2, x) * x,
    "log1p": lambda V, x, y, g: g / (x + _c(V, 1, x)),
    "expm1": lambda V, x, y, g: g * V.apply("exp", x),
    "erf": lambda V, x, y, g: g * V.apply("exp", V.apply("neg", x * x)) *
    _c(V, 2 / math.sqrt(math.pi), x),
    "relu6": lambda V, x, y, g: V.select(_between(V, x, 0, 6), g),
    "silu": _silu,
    "gelu": _gelu,
    "hswish": _hswish,
    "hsigmoid": lambda V, x, y, g: V.select(_between(V, x, -3, 3), g * _c(V, 1 / 6, x)),
    "softplus": lambda V, x, y, g: g * _sigmoid_of(V, x),
    "logsigmoid": lambda V, x, y, g: g * _sigmoid_of(V, V.apply("neg", x)),
    "fast_tanh": _fast_tanh,
    # math_extra
    "asin": lambda V, x, y, g: g / V.apply("cos", y),
    "acos": lambda V, x, y, g: V.apply("neg", g / V.apply("sin", y)),
    "tan": lambda V, x, y, g: g / V.apply("square", V.apply("cos", x)),
    "sinh": lambda V, x, y, g: g * V.apply("cosh", x),
    "cosh": lambda V, x, y, g: g * V.apply("sinh", x),
    "asinh": lambda V, x, y, g: g / V.apply("sqrt", x * x + _c(V, 1, x)),
    "acosh": lambda V, x, y, g: g / V.apply("sqrt", x * x - _c(V, 1, x)),
    "atanh": lambda V, x, y, g: g / (_c(V, 1, x) - x * x),
    "sign": lambda V, x, y, g: V.zeros_like(x),
}


def _maximum(V, a, b, y, g):
    return V.select(_cmp(V, "le", b, a), g), V.select(_cmp(V, "lt", a, b), g)


def _minimum(V, a, b, y, g):
    return V.select(_cmp(V, "le", a, b), g), V.select(_cmp(V, "lt", b, a), g)


def _pow(V, a, b, y, g):
    ga = g * b * V.apply("pow", a, b - _c(V, 1, b)) if V.needs_grad(0) else None
    return ga, g * y * V.apply("log", a) if V.needs_grad(1) else None


def _atan2(V, a, b, y, g):
    r2 = a * a + b * b
    return g * b / r2, V.apply("neg", g * a / r2)


BINARY_VJPS = {
    "add": lambda V, a, b, y, g: (g, g),
    "sub": lambda V, a, b, y, g: (g, V.apply("neg", g)),
    "mul": lambda V, a, b, y, g: (g * b, g * a),
    "div": lambda V, a, b, y, g: (g / b, V.apply("neg", g * a / (b * b))),
    "maximum": _maximum,
    "minimum": _minimum,
    "pow": _pow,
    "floor_div": lambda V, a, b, y, g: (None, None),
    "mod": lambda V, a, b, y, g: (g, None),
    "atan2": _atan2,
    "logaddexp": lambda V, a, b, y, g: (g * _sigmoid_of(V, a - b), g * _sigmoid_of(V, b - a)),
    # fused modes: MegEngine differentiates them through their output
    "fuse_add_relu": lambda V, a, b, y, g: (_relu(V, None, y, g),) * 2,
    "fuse_add_sigmoid": lambda V, a, b, y, g: (g * y * (_c(V, 1, y) - y),) * 2,
    "fuse_add_tanh": lambda V, a, b, y, g: (g * (_c(V, 1, y) - y * y),) * 2,
    "fuse_add_h_swish": lambda V, a, b, y, g: (_hswish(V, a + b, y, g),) * 2,
}


def unary_vjp(name: str):
    """`OpDef.vjp` of the unary elementwise op `name`."""
    return _unary(UNARY_VJPS[name])


def binary_vjp(name: str):
    """`OpDef.vjp` of the binary (broadcasting) elementwise op `name`."""
    return _elementwise(BINARY_VJPS[name])


fuse_mul_add3_vjp = _elementwise(lambda V, a, b, c, y, g: (g * b, g * a, g))
# COND_LEQ_MOV (x <= y ? z : 0): z's gradient where the condition held, none for x and y
TERNARY_VJPS = {
    "fuse_mul_add3": fuse_mul_add3_vjp,
    "cond_leq_mov": _elementwise(lambda V, a, b, c, y, g: (
        None, None, V.select(_cmp(V, "le", a, b), g))),
}
