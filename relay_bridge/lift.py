"""Relax -> megtrace Graph: the way back, for graphs TVM's passes have optimized.

A converter table keyed by Relax op name (as TVM's frontends map the other way). Only
what our own lowerings and the inference passes produce needs lifting; anything else is
reported at once as UnsupportedOpError.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

from megtrace.errors import UnsupportedOpError
from megtrace.ir import Graph, TensorType, Var
from megtrace.ops import get

from ._tvm import relax

Converter = Callable[[Graph, Any, list, TensorType], list]
CONVERTERS: dict[str, Converter] = {}


def converter(*names: str):
    def deco(fn: Converter) -> Converter:
        for n in names:
            CONVERTERS[f"relax.{n}"] = fn
        return fn
    return deco


def _node(g: Graph, name: str, ins: list, **params) -> list:
    return list(g.add_node(get(name), ins, params))


def _ty(expr) -> TensorType:
    t = expr.ty
    return TensorType(tuple(int(d) for d in t.shape), str(t.dtype))


def lift(mod, input_names: list[str], output_names: list[str],
         names: dict[str, str] | None = None, kept: dict | None = None) -> Graph:
    """The `main` function of `mod` (one dataflow block) as a megtrace Graph; `names` maps
    Relax variable names back to the original node names (for keep_opr_name/var names);
    `kept` maps the opaque calls optimize.to_relax_for_inference made back to their nodes."""
    rx = relax()
    from tvm.ir.expr import GenericConst as Const
    func = mod["main"]
    g = Graph()
    env: dict[Any, Var] = {}
    for param, name in zip(func.params, input_names):
        env[param] = g.add_input(_ty(param), name)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    opaque = "relax.call_pure_packed"
    missing = sorted({b.value.op.name for b in bindings if isinstance(b.value, rx.Call)
                      and b.value.op.name not in CONVERTERS and b.value.op.name != opaque})
    if missing:
        raise UnsupportedOpError(f"lift: no megtrace operator for {', '.join(missing)}")

    consts: dict[tuple, Var] = {}

    def arg(a):
        """A Relax argument as megtrace values: constants become graph constants and an
        inline tuple (concat's operand list) a list of them; attributes-like arguments
        (PrimValue, ShapeExpr) are passed on for the converter to read."""
        if isinstance(a, Const):
            value = a.value.numpy()
            key = (value.dtype.str, value.shape, value.tobytes())
            if key not in consts:      # TVM inlines a constant at each use: one var again
                consts[key] = g.add_const(value)
            return consts[key]
        if _tensor_tuple(a):
            return [arg(f) for f in a.fields]
        if isinstance(a, rx.Var):
            return env[a]
        return a

    def _tensor_tuple(a):       # concat's operands inline, not bound to a tuple var
        return isinstance(a, rx.Tuple) and a.fields and \
            all(isinstance(f, (rx.Var, Const)) for f in a.fields)

    for b in bindings:
        v = b.value
        if isinstance(v, rx.Call):
            args = [arg(a) for a in v.args]
            if v.op.name == opaque:
                node = (kept or {}).get(str(v.args[0].global_symbol))
                if node is None:
                    raise UnsupportedOpError(f"lift: unknown packed call {v.args[0]}")
                outs = list(g.add_node(node.op, args[1:], node.kwargs))
                outs[0].name_hint = (names or {}).get(b.var.name, "") or outs[0].name_hint
                env[b.var] = outs[0] if len(outs) == 1 else outs
                continue
            ty = _ty(b.var) if hasattr(b.var.ty, "shape") else None   # None: a tuple
            outs = CONVERTERS[v.op.name](g, v, args, ty)
            hint = (names or {}).get(b.var.name, "")
            if hint and g.nodes and outs[0] is g.nodes[-1].outputs[0]:
                outs[0].name_hint = hint
            env[b.var] = outs[0]
        elif isinstance(v, rx.TupleGetItem):
            env[b.var] = env[v.tuple_value][v.index]
        elif isinstance(v, rx.Tuple):
            env[b.var] = [arg(f) for f in v.fields]
        elif isinstance(v, (rx.Var, Const)):
            env[b.var] = arg(v)
        else:
            raise UnsupportedOpError(f"lift: cannot lift a {type(v).__name__} binding")
    body = func.body.body
    outs = arg(body)
    outs = outs if isinstance(outs, list) else [outs]
    g.set_outputs(outs, output_names)
    return g.prune()


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


# -- elementwise ----------------------------------------------------------------------
_BINARY = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div",
           "maximum": "maximum", "minimum": "minimum", "power": "pow",
           "floor_divide": "floor_div", "less": "lt", "less_equal": "le", "greater": "gt",
           "greater_equal": "ge", "equal": "eq", "logical_and": "logical_and",
           "logical_or": "logical_or", "logical_xor": "logical_xor"}
_UNARY = {"nn.relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log",
          "negative": "neg", "abs": "abs", "floor": "floor", "ceil": "ceil", "sin": "sin",
          "cos": "cos", "sqrt": "sqrt", "erf": "erf", "round": "round", "nn.silu": "silu",
          "nn.gelu": "gelu", "logical_not": "logical_not"}
# inverse/hyperbolic trigonometry, sign, atan2, logaddexp, shifts, isnan/isinf
_UNARY.update({n: n for n in ("tan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh",
                              "sign", "isnan", "isinf")})
_BINARY.update({"atan2": "atan2", "left_shift": "left_shift", "right_shift": "right_shift"})

for _r, _m in _BINARY.items():
    CONVERTERS[f"relax.{_r}"] = (lambda g, call, a, out, _m=_m: _node(g, _m, a))
for _r, _m in _UNARY.items():
    CONVERTERS[f"relax.{_r}"] = (lambda g, call, a, out, _m=_m: _node(g, _m, a))


@converter("rsqrt")
def _rsqrt(g, call, a, out):
    one = g.add_const(np.ones((), out.dtype))
    return _node(g, "div", [one, _node(g, "sqrt", a)[0]])


@converter("clip")
def _clip(g, call, a, out):
    lo, hi = float(call.args[1].value), float(call.args[2].value)
    return _node(g, "clip", a[:1], lower=None if lo == float("-inf") else lo,
                 upper=None if hi == float("inf") else hi)


@converter("nn.leakyrelu")
def _leaky(g, call, a, out):
    return _node(g, "leaky_relu", a, negative_slope=float(call.attrs.alpha))


# float16 convolutions/matrix products with float32 sums lower as op(out_dtype=float32)
# followed by astype(float16): the lifted op (compute_mode FLOAT32) gives float16, widened
# for the Relax value's float32; the astype back to float16 then takes the op's own result
_WIDENED: "weakref.WeakKeyDictionary[Var, Var]" = weakref.WeakKeyDictionary()


def _float32_sums(name: str, g, ins, out, out_dtype, **params) -> list:
    """`name` on float16 inputs with float32 accumulation when Relax asked for a float32
    result of them (MegEngine's compute_mode FLOAT32), else the plain op."""
    if str(out_dtype) == "float32" and ins[0].type.dtype == "float16":
        (narrow,) = _node(g, name, ins, compute_mode="FLOAT32", **params)
        (wide,) = _node(g, "astype", [narrow], dtype="float32")
        _WIDENED[wide] = narrow
        return [wide]
    return _node(g, name, ins, **params)


@converter("astype")
def _astype(g, call, a, out):
    if a[0].type.dtype == out.dtype:   # argmax's int64 -> int32 when arg_reduce gave int32
        return [a[0]]
    narrow = _WIDENED.get(a[0])
    if narrow is not None and narrow.type.dtype == out.dtype:
        return [narrow]
    return _node(g, "astype", a, dtype=out.dtype)


@converter("where")
def _where(g, call, a, out):
    return _node(g, "where", a)


# -- nn -------------------------------------------------------------------------------
def _symmetric(name: str, pad) -> tuple[int, int]:
    top, left, bottom, right = _ints(pad)
    if (top, left) != (bottom, right):
        raise UnsupportedOpError(f"lift: {name} with asymmetric padding {tuple(pad)}")
    return top, left


@converter("nn.conv2d")
def _conv2d(g, call, a, out):
    at = call.attrs
    x, w = a
    groups = int(at.groups)
    if groups > 1:
        oc, icg, kh, kw = w.type.shape
        w = _node(g, "reshape", [w], shape=(groups, oc // groups, icg, kh, kw))[0]
    return _float32_sums("conv2d", g, [x, w], out, at.out_dtype, stride=_ints(at.strides),
                         padding=_symmetric("conv2d", at.padding),
                         dilation=_ints(at.dilation))


@converter("nn.max_pool2d", "nn.avg_pool2d")
def _pool(g, call, a, out):
    at = call.attrs
    if call.op.name.endswith("max_pool2d"):
        mode = "max"
    else:
        mode = "average" if at.count_include_pad else "average_count_exclude_padding"
    return _node(g, "pool2d", a, mode=mode, kernel=_ints(at.pool_size),
                 stride=_ints(at.strides), padding=_symmetric("pool2d", at.padding))


@converter("nn.adaptive_avg_pool2d")
def _adaptive(g, call, a, out):
    return _node(g, "adaptive_pool2d", a, mode="average", out=out.shape[2:])


@converter("nn.softmax")
def _softmax(g, call, a, out):
    return _node(g, "softmax", a, axis=int(call.attrs.axis))


@converter("nn.layer_norm")
def _layer_norm(g, call, a, out):
    """Trailing axes: layer_norm; one run of axes elsewhere: general_norm."""
    nd = len(out.shape)
    axes = sorted(int(x) % nd for x in call.attrs.axes)
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise UnsupportedOpError(f"lift: layer_norm over non-adjacent axes {axes}")
    if axes[-1] == nd - 1:
        return _node(g, "layer_norm", a, eps=float(call.attrs.epsilon), normalized_dim=len(axes))
    return _node(g, "general_norm", a, eps=float(call.attrs.epsilon), axis_start=axes[0],
                 axis_end=axes[-1] + 1)


@converter("matmul")
def _matmul(g, call, a, out):
    return _float32_sums("matmul", g, a, out, call.attrs.out_dtype)


# -- shapes ---------------------------------------------------------------------------
def _as_flatten(src: TensorType, dst: TensorType):
    """(start, end) when reshaping src to dst merges one run of axes, else None."""
    if dst.ndim >= src.ndim:
        return None
    for start in range(src.ndim):
        end = start + src.ndim - dst.ndim
        if src.shape[:start] == dst.shape[:start] and \
                src.shape[end + 1:] == dst.shape[start + 1:]:
            return start, end
    return None


@converter("reshape")
def _reshape(g, call, a, out):
    """A reshape that merges axes is written back as flatten, so that the file keeps the
    batch symbolic (GetVarShape + Reshape), as MegEngine writes flatten."""
    x = a[0]
    if x.type.shape == out.shape:       # MegEngine's loader folds a no-op Reshape away
        return [x]
    axes = _as_flatten(x.type, out)
    if axes is not None:
        return _node(g, "flatten", [x], start_axis=axes[0], end_axis=axes[1])
    return _node(g, "reshape", [x], shape=out.shape)


@converter("permute_dims")
def _permute(g, call, a, out):
    axes = call.attrs.axes
    pattern = _ints(axes) if axes is not None else tuple(range(a[0].type.ndim))[::-1]
    return _node(g, "transpose", a, pattern=pattern)


@converter("sum", "mean", "max", "min", "prod")
def _reduce(g, call, a, out):
    mode = call.op.name.split(".")[-1]
    axis = call.attrs.axis
    return _node(g, "reduce", a, mode=mode, axis=None if axis is None else _ints(axis),
                 keepdims=bool(call.attrs.keepdims))


@converter("concat")
def _concat(g, call, a, out):
    return _node(g, "concat", a[0], axis=int(call.attrs.axis))


@converter("cumsum")
def _cumsum(g, call, a, out):
    return _node(g, "cumsum", a[:1], axis=int(call.attrs.axis))


@converter("take")
def _take(g, call, a, out):
    return _node(g, "take", a, axis=int(call.attrs.axis))


@converter("broadcast_to")
def _broadcast(g, call, a, out):
    return _node(g, "broadcast_to", a[:1], shape=out.shape)


@converter("strided_slice")
def _strided_slice(g, call, a, out):
    fields = [[int(v.value) for v in t.fields] for t in call.args[1:5]]
    axes, begins, ends, steps = (fields + [[1] * len(fields[0])])[:4]
    rows = tuple((ax, b, e, s, None) for ax, b, e, s in zip(axes, begins, ends, steps))
    return _node(g, "subtensor", a[:1], index=rows)


# -- sorting, arg-reductions, gather/scatter (MegEngine's math/tensor functionals) --------
@converter("topk")
def _topk(g, call, a, out):
    """A full-length sort is argsort; a values-only topk is lifted with its indices."""
    k, n = int(call.attrs.k), _ty(call.args[0]).shape[-1]
    descending = bool(call.attrs.largest)
    outs = _node(g, "argsort", a, descending=descending) if k == n and \
        _ty(call.args[0]).ndim == 2 else _node(g, "topk", a, k=k, descending=descending)
    return [outs[0]] if str(call.attrs.ret_type) == "values" else [outs]


@converter("argmax", "argmin")
def _arg_reduce(g, call, a, out):
    """arg_reduce gives int32; the astype that follows in our lowering keeps it."""
    mode = "max" if call.op.name.endswith("argmax") else "min"
    return _node(g, "arg_reduce", a, mode=mode, axis=int(call.attrs.axis),
                 keepdims=bool(call.attrs.keepdims))


@converter("gather_elements")
def _gather_elements(g, call, a, out):
    return _node(g, "gather", a, axis=int(call.attrs.axis))


@converter("scatter_elements")
def _scatter_elements(g, call, a, out):
    return _node(g, "scatter", a, axis=int(call.attrs.axis))
