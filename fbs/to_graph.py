"""`ModelFile` -> megtrace `Graph`: a converter table from MegEngine oprs to our ops.

Oprs that map 1:1 to an op are found through the ops' own `mge` declarations, oprs of
composite writers through the ops' `mge_read` rules; the table below handles the rest
(sources, fused Elemwise modes, shape arithmetic, ConvBias).
Input shapes can be overridden, so one file serves any batch size: shape arithmetic
(GetVarShape/Subtensor/Concat) folds into constants for the shapes given.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np

from megtrace.errors import FormatError, ShapeError, UnsupportedModelError, UnsupportedOpError
from megtrace.ir import Graph, TensorType, Var
from megtrace.ops import MgeChoice, MgeOpr, OpDef, all_ops, get
from megtrace.ops.quantized import conv_bias_params
from megtrace.ops.random import RNG_KEY_PREFIX
from megtrace.ops.quantized import spec as quantized_spec

from .load_collapse import Collapse, LoaderModel
from .reader import ModelFile, Opr

Rule = Callable[[Graph, Opr, list[Var], dict], list[Var | None]]
RULES: dict[str, Rule] = {}


def rule(*types: str):
    def deco(fn: Rule) -> Rule:
        for t in types:
            RULES[t] = fn
        return fn
    return deco


@lru_cache(maxsize=None)
def spec_index() -> dict[str, tuple[tuple[OpDef, MgeOpr], ...]]:
    index: dict[str, list] = {}
    for op in all_ops():
        specs = op.mge.specs if isinstance(op.mge, MgeChoice) else \
            (op.mge,) if isinstance(op.mge, MgeOpr) else ()
        for spec in specs:
            index.setdefault(spec.type, []).append((op, spec))
    return {k: tuple(v) for k, v in index.items()}


@lru_cache(maxsize=None)
def op_rules() -> dict[str, Rule]:
    """Reader rules declared by the ops themselves (`OpDef.mge_read`)."""
    found: dict[str, Rule] = {}
    for op in all_ops():
        for opr_type, fn in op.mge_read.items():
            if opr_type in found or opr_type in RULES:
                raise ValueError(f"{op.name}: a reader rule for {opr_type} exists already")
            found[opr_type] = fn
    return found


def rule_for(opr_type: str) -> Rule | None:
    return RULES.get(opr_type) or op_rules().get(opr_type) or \
        (_generic if opr_type in spec_index() else None)


def _fields(opr: Opr) -> dict:
    return opr.params[0][1] if opr.params else {}


def _generic(g: Graph, opr: Opr, ins: list[Var], _shapes) -> list[Var | None]:
    fields = _fields(opr)
    for op, spec in spec_index()[opr.type]:
        if all(fields.get(k) == v for k, v in spec.match.items()):
            params = spec.decode(fields) if spec.decode else {}
            results = g.add_node(op, ins, params, name_hint=_hint(opr))
            outs: list[Var | None] = [None] * spec.outputs
            for i, var in zip(spec.results or (spec.result,), results):
                outs[i] = var
            return outs
    shown = ", ".join(f"{k}={v}" for k, v in fields.items())
    raise UnsupportedOpError(f"{opr.type}({shown}): megtrace has no operator for it")


def _hint(opr: Opr) -> str:
    return opr.name or opr.type


# Param fields whose other values megtrace does not compute (the ops assume NCHW,
# cross-correlation, BatchNorm over channels, ...): a file using them is refused rather
# than run differently from MegEngine. Every other field a rule reads is implemented.
SUPPORTED_VALUES: dict[str, dict[str, tuple]] = {
    "Convolution": {"mode": ("CROSS_CORRELATION",),
                    "format": ("NCHW", "NCHW88", "NCHW44", "NHWCD4")},
    "ConvBias": {"mode": ("CROSS_CORRELATION",), "format": ("NCHW", "NCHW88", "NCHW44", "NHWCD4"),
                 "nonlineMode": ("IDENTITY", "RELU", "SIGMOID")},
    "Pooling": {"format": ("NCHW", "NCHW88", "NCHW44", "NHWCD4")},
    "RelayoutFormat": {"mode": ("NCHW_NHWCD4I", "NHWCD4I_NCHW")},
    "AdaptivePooling": {"format": ("NCHW", "NCHW88", "NCHW44")},
    "MatrixMul": {"format": ("DEFAULT",)},
    "BN": {"param_dim": ("DIM_1C11",), "fwd_mode": ("INFERENCE",)},
    "Reduce": {"data_type": (0, 2, 3)},         # DEFAULT, FLOAT_O32xC32, FLOAT_O16xC32
    "Cumsum": {"exclusive": (False,), "reverse": (False,)},
    "Remap": {"format": ("NCHW",), "imode": ("NEAREST", "LINEAR")},
    "Convolution3D": {"mode": ("CROSS_CORRELATION",), "format": ("NCDHW",)},
    "ROIAlign": {"format": ("NCHW",)},
    "CondTake": {"mode": (0,), "val": (1.0,)},  # EQ 1: the mask's true elements
    "SVD": {"compute_uv": (True,)},             # MegEngine's Python API always sets it
}


def check_params(opr: Opr) -> None:
    """Refuse an opr whose params ask for something megtrace does not compute."""
    for table, fields in opr.params:
        for name, allowed in SUPPORTED_VALUES.get(table, {}).items():
            if name in fields and fields[name] not in allowed:
                raise UnsupportedModelError(
                    f"{opr.type}: param {table}.{name}={fields[name]!r} is not supported "
                    f"(megtrace computes {name} in {', '.join(map(repr, allowed))} only)")


def value_shaped_oprs(model: ModelFile) -> list[str]:
    """The opr types in `model` whose output shapes depend on input values (CondTake)."""
    shaped = {spec.type for spec_list in spec_index().values() for op, spec in spec_list
              if op.value_shaped}
    return sorted({o.type for o in model.oprs if o.type in shaped})


def evaluate_model(model: ModelFile, values: dict[str, np.ndarray],
                   limit_bytes: int) -> list[np.ndarray]:
    """The model's outputs for these input values, computed opr by opr with each op's
    NumPy implementation and the values' real shapes: how a model whose shapes follow its
    values runs (a static build would fold its shape arithmetic to CondTake's bound)."""
    graph, collapses = _build(model, {n: TensorType(a.shape, a.dtype) for n, a in values.items()},
                              _EvaluatingGraph(input_values=dict(values),
                                               limit_bytes=limit_bytes))
    refused = [c for c in collapses if c.refused]
    if refused:
        raise FormatError(f"MegEngine cannot load this model: {refused[0].message()}")
    return [graph.consts[v] for v in graph.outputs]


def check_value_size(op_name: str, t: TensorType, limit_bytes: int) -> None:
    """Refuse a loaded model's value larger than `limit_bytes` before it is allocated or
    compiled (a file of a few bytes can ask for a broadcast to any shape)."""
    nbytes = t.size * np.dtype(t.dtype).itemsize
    if nbytes > limit_bytes:
        raise UnsupportedModelError(
            f"{op_name}: its result {t} would take {nbytes} bytes, more than the "
            f"{limit_bytes} a loaded model may use per value (set MEGTRACE_MAX_VALUE_BYTES "
            "to allow more)")


@dataclass(eq=False)
class _EvaluatingGraph(Graph):
    """A Graph whose inputs are values and whose nodes are computed as they are added,
    each result checked against `limit_bytes` before it is allocated."""

    input_values: dict[str, np.ndarray] = field(default_factory=dict)
    limit_bytes: int = 0

    def add_node(self, op, inputs, params=None, name_hint="", out_types=None):
        kwargs = dict(op.bind(params or {}))
        bounds = op.infer_types([v.type for v in inputs], kwargs)
        for t in bounds:
            check_value_size(op.name, t, self.limit_bytes)
        values = op.run_eager([self.consts[v] for v in inputs], kwargs)
        return tuple(self.add_const(val, name_hint, t.dtype) for val, t in zip(values, bounds))


def build_graph(model: ModelFile, input_types: dict[str, TensorType] | None = None,
                names: dict[Var, str] | None = None) -> Graph:
    """Build a typed Graph; `input_types` overrides the shapes recorded in the file.
    A file that MegEngine's own loader refuses (fbs/load_collapse.py) raises FormatError.
    `names`, when given, receives the file's name of each var it names."""
    graph, collapses = _build(model, input_types, names=names)
    refused = [c for c in collapses if c.refused]
    if refused:
        raise FormatError(f"MegEngine cannot load this model: {refused[0].message()}")
    return _rng_keys_last(graph)


def _rng_keys_last(graph: Graph) -> Graph:
    """The file's inputs first, in their order, then the keys of its random oprs (fed by
    LoadedGraph on every run, ops/random.py)."""
    order = sorted(range(len(graph.inputs)),
                   key=lambda i: graph.input_names[i].startswith(RNG_KEY_PREFIX))
    graph.inputs = [graph.inputs[i] for i in order]
    graph.input_names = [graph.input_names[i] for i in order]
    return graph


def find_collapses(model: ModelFile) -> list[Collapse]:
    """Every opr that MegEngine's loader does not rebuild as written (refused or not)."""
    return _build(model, None)[1]


def _build(model: ModelFile, input_types, g: Graph | None = None,
           names: dict[Var, str] | None = None) -> tuple[Graph, list[Collapse]]:
    unknown = sorted({o.type for o in model.oprs if rule_for(o.type) is None})
    if unknown:
        raise UnsupportedOpError(f"load_graph: no megtrace operator for {', '.join(unknown)}")
    g = Graph() if g is None else g
    env: dict[int, Var | None] = {}
    loader = LoaderModel(lambda i: _type_of(env, i, "shape"),
                         lambda i: g.consts.get(env.get(i)), lambda i: _dtype_of(env, i))
    collapses: list[Collapse] = []
    for index, opr in enumerate(model.oprs):
        try:
            ins = [env[i] for i in opr.inputs]
        except KeyError as e:
            raise FormatError(f"{opr.type}: input id {e.args[0]} is not defined before it") from None
        if any(v is None for v in ins):
            raise FormatError(f"{opr.type}: uses an output that megtrace does not model")
        check_params(opr)
        outs = rule_for(opr.type)(g, opr, ins, input_types or {})
        if len(outs) != len(opr.outputs):
            raise FormatError(f"{opr.type}: declares {len(opr.outputs)} outputs, the opr has "
                              f"{len(outs)}")
        env.update(zip(opr.outputs, outs))
        if names is not None:
            for vid, var in zip(opr.outputs, outs):
                if var is not None and var not in names and vid in model.names:
                    names[var] = model.names[vid]
        collapse = loader.collapse(index, opr)
        if collapse is not None:
            collapses.append(collapse)
        loader.record(opr, collapse)
    try:
        outputs = [env[i] for i in model.output_ids]
    except KeyError as e:
        raise FormatError(f"output id {e.args[0]} is not produced by any opr") from None
    g.set_outputs(outputs, model.output_names())
    return g.prune(), collapses


def _dtype_of(env: dict, vid: int):
    """A value's dtype name, or its QuantParam for MegEngine's quantized dtypes."""
    var = env.get(vid)
    return None if var is None else var.type.quant or var.type.dtype


def _type_of(env: dict, vid: int, what: str):
    var = env.get(vid)
    return None if var is None else getattr(var.type, what)


# -- sources ----------------------------------------------------------------------------
@rule("Host2DeviceCopy")
def _h2d(g, opr, ins, input_types):
    t = opr.tensors[0] if opr.tensors else None
    if t is None or not t.name:
        raise FormatError("Host2DeviceCopy without a named tensor")
    if isinstance(g, _EvaluatingGraph):
        return [g.add_const(g.input_values[t.name], t.name, t.dtype)]
    given = input_types.get(t.name)
    return [g.add_input(given or TensorType(t.shape, t.dtype), t.name)]


@rule("ImmutableTensor", "SharedDeviceTensor", "MultipleDeviceTensorHolder",
      "MultipleDeviceTensorWithFormatHolder", "SharedDeviceTensorWithFormat")
def _consts(g, opr, ins, _):
    if not opr.tensors or any(t.data is None for t in opr.tensors):
        raise FormatError(f"{opr.type} load with no tensor data")
    return [g.add_const(t.data, t.name or (opr.name if len(opr.tensors) == 1 else "") or "")
            for t in opr.tensors]


@rule("Identity", "Copy")
def _identity(g, opr, ins, _):
    return [ins[0]]


# -- Elemwise modes that are several megtrace ops ------------------------------------------
def _un(g, name, x, hint):
    return g.add_node(get(name), [x], {}, hint)[0]


def _bin(g, name, a, b, hint):
    return g.add_node(get(name), [a, b], {}, hint)[0]


_COMPARE = {"LT": "lt", "LEQ": "le", "EQ": "eq"}


@rule("Elemwise")
def _elemwise(g, opr, ins, shapes):
    mode = _fields(opr).get("mode")
    hint = _hint(opr)
    if mode == "PRELU":          # x, slope: leaky_relu when the slope is one constant
        x, slope = ins
        if slope in g.consts and g.consts[slope].size == 1:
            return list(g.add_node(get("leaky_relu"), [x], {
                "negative_slope": float(g.consts[slope].reshape(-1)[0])}, hint))
        zero = g.add_const(np.zeros((), x.type.dtype))
        return [_bin(g, "add", _bin(g, "maximum", x, zero, hint),
                     _bin(g, "mul", _bin(g, "minimum", x, zero, hint), slope, hint), hint)]
    if mode == "EQ" and ins[0] is ins[1] and ins[0].type.dtype in ("float32", "float16"):
        # x == x is MegEngine's NaN test (how it dumps isnan); TVM would fold it to true
        flag = _un(g, "logical_not", _un(g, "isnan", ins[0], hint), hint)
        return list(g.add_node(get("astype"), [flag], {"dtype": ins[0].type.dtype}, hint))
    if mode in _COMPARE:        # MegEngine compares in the operands' dtype (0/1 values)
        (flag,) = g.add_node(get(_COMPARE[mode]), ins, {}, hint)
        return list(g.add_node(get("astype"), [flag], {"dtype": ins[0].type.dtype}, hint))
    if mode == "CLIP":
        return [_bin(g, "minimum", _bin(g, "maximum", ins[0], ins[1], hint), ins[2], hint)]
    if mode == "SWITCH_GT0":     # (x > 0) * y
        zero = g.add_const(np.zeros((), ins[0].type.dtype))
        mask = g.add_node(get("gt"), [ins[0], zero], {}, hint)[0]
        zeros = g.add_const(np.zeros((), ins[1].type.dtype))
        return list(g.add_node(get("where"), [mask, ins[1], zeros], {}, hint))
    return _generic(g, opr, ins, shapes)


# -- transposed convolution: MegEngine's inputs are (weight, input[, output-shape source]) ---
@rule("ConvolutionBackwardData", "Convolution3DBackwardData")
def _conv_transpose(g, opr, ins, _):
    f = _fields(opr)
    nd = 2 if opr.type == "ConvolutionBackwardData" else 3
    axes = ("h", "w") if nd == 2 else ("d", "h", "w")
    if f.get("mode", "CROSS_CORRELATION") != "CROSS_CORRELATION":
        raise UnsupportedOpError(f"{opr.type} mode {f.get('mode')} is not supported")
    params = {"stride": tuple(f.get(f"stride_{a}", 1) for a in axes),
              "padding": tuple(f.get(f"pad_{a}", 0) for a in axes),
              "dilation": tuple(f.get(f"dilate_{a}", 1) for a in axes),
              "output_padding": (0,) * nd}
    w, x = ins[0], ins[1]
    if x.type.quant is not None and nd == 2 and len(ins) == 2:    # quantized deconvolution
        dtype = quantized_spec(opr.output_dtype) if opr.output_dtype is not None else None
        return list(g.add_node(get("quantized_conv_transpose"), [x, w],
                               {**params, "dtype": dtype}, _hint(opr)))
    op = get(f"conv_transpose{nd}d")
    if len(ins) == 3:           # the output size is the third input's
        natural = op.infer(x.type, w.type, **params).shape[2:]
        params["output_padding"] = tuple(int(t) - int(n) for t, n in
                                         zip(ins[2].type.shape[2:], natural))
    return list(g.add_node(op, [x, w], params, _hint(opr)))


# -- shape arithmetic (folds to constants for concrete input shapes) ------------------------
def _const_value(g: Graph, var: Var, what: str) -> np.ndarray:
    if var not in g.consts:
        raise UnsupportedOpError(f"{what} must be computable from shapes and constants")
    return g.consts[var]


@rule("GetVarShapeV1")
def _get_shape(g, opr, ins, _):
    """GetVarShape of several inputs is the shape they broadcast to: MegEngine's
    optimize_for_inference writes BatchNorm after a biased conv as
    Broadcast(conv, GetVarShape(bias, conv))."""
    if len(ins) == 1:
        (shape,) = g.add_node(get("get_shape"), ins, {}, _hint(opr))
    else:
        shapes = [v.type.shape for v in ins]
        try:
            joint = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ShapeError(f"GetVarShape {opr.name!r}: the input shapes "
                             f"{', '.join(map(str, shapes))} do not broadcast") from None
        shape = g.add_const(np.array(joint, np.int32), _hint(opr))
    axis = _fields(opr).get("axis", 7)
    if axis != 7:
        (shape,) = g.add_node(get("subtensor"), [shape], {"index": ((0, None, None, None, axis),)})
        shape = g.add_const(g.consts[shape].reshape(1), _hint(opr))
    return [shape]


@rule("Linspace")
def _linspace(g, opr, ins, _):
    """MegEngine's kernel: float32 ends, start + i * step in double (aranges of a run-time
    length in index grids: constants once the shapes are known)."""
    start, stop, num = (_const_value(g, v, "Linspace input").reshape(-1)[0] for v in ins)
    num = int(num)
    endpoint = _fields(opr).get("endpoint", True)
    start, stop = float(np.float32(start)), float(np.float32(stop))
    step = (stop - start) / max(num - 1 if endpoint else num, 1)
    values = (start + np.arange(num, dtype=np.float64) * step).astype(np.float32)
    return [g.add_const(values, _hint(opr))]


@rule("Subtensor")
def _subtensor(g, opr, ins, _):
    items = _fields(opr).get("items", [])
    values = iter(ins[1:])
    rows = []
    for it in items:
        row = {}
        for key in ("begin", "end", "step", "idx"):
            if it[key]:
                var = next(values, None)
                if var is None:
                    raise FormatError("Subtensor: fewer index inputs than its items need")
                row[key] = int(_const_value(g, var, "Subtensor index").reshape(-1)[0])
        rows.append((int(it["axis"]), row.get("begin"), row.get("end"), row.get("step"),
                     row.get("idx")))
    if next(values, None) is not None:
        raise FormatError("Subtensor: more index inputs than its items use")
    (out,) = g.add_node(get("subtensor"), ins[:1], {"index": tuple(rows)}, _hint(opr))
    if out.type.ndim == 0:     # MegEngine graphs have no 0-d values: a scalar is shape (1,)
        (out,) = g.add_node(get("reshape"), [out], {"shape": (1,)}, _hint(opr))
    return [out]


@rule("ReshapeV1")
def _reshape(g, opr, ins, _):
    shape = [int(d) for d in _const_value(g, ins[1], "Reshape target shape").reshape(-1)]
    axis = _fields(opr).get("axis", 7)
    if axis != 7:
        shape[axis] = -1
    return list(g.add_node(get("reshape"), ins[:1], {"shape": tuple(shape)}, _hint(opr)))


# -- ConvBias = conv2d + bias + nonlinearity --------------------------------------------
_NONLINE = {"IDENTITY": None, "RELU": "relu", "SIGMOID": "sigmoid"}


# -- NCHW88 / NCHW44 (optimize_for_inference's enable_nchw88 / enable_nchw44) ------------
_BLOCKED = ("NCHW88", "NCHW44")


def _conv_params(f: dict) -> dict:
    return {"stride": (f["stride_h"], f["stride_w"]), "padding": (f["pad_h"], f["pad_w"]),
            "dilation": (f["dilate_h"], f["dilate_w"])}


@rule("Convolution", "PoolingV1")
def _maybe_blocked(g, opr, ins, shapes):
    """Convolution and Pooling in a blocked format are megtrace's *_nchwxx ops (the
    weight's rank tells the case); NCHW ones are read generically."""
    f = _fields(opr)
    if f.get("format") == "NHWCD4":
        if opr.type == "Convolution":
            return list(g.add_node(get("conv2d_nhwcd4"), ins,
                                   {**_conv_params(f), "sparse": f["sparse"]}, _hint(opr)))
        return list(g.add_node(get("pool2d_nhwcd4"), ins, get("pool2d").mge.decode(f),
                               _hint(opr)))
    if f.get("format", "NCHW") not in _BLOCKED:
        return _generic(g, opr, ins, shapes)
    if opr.type == "Convolution":
        return list(g.add_node(get("conv2d_nchwxx"), ins, _conv_params(f), _hint(opr)))
    pool = get("pool2d").mge.decode(f)
    return list(g.add_node(get("pool2d_nchwxx"), ins, pool, _hint(opr)))


@rule("ConvBiasForward")
def _conv_bias(g, opr, ins, _):
    f = _fields(opr)
    if ins[0].type.quant is not None:          # MegEngine's quantized ConvBias
        if len(ins) > 3:
            raise UnsupportedModelError("quantized ConvBias with a z input: megtrace reads x, "
                                        "filter and bias only")
        groups = ins[1].type.shape[0] if ins[1].type.ndim == 5 else 1
        dtype = quantized_spec(opr.output_dtype) if opr.output_dtype is not None else None
        return list(g.add_node(get("quantized_conv_bias"), ins,
                               conv_bias_params(f, groups, dtype), _hint(opr)))
    if f.get("nonlineMode") not in _NONLINE:
        raise UnsupportedOpError(f"ConvBias nonlineMode {f.get('nonlineMode')} is not supported")
    params = _conv_params(f)
    hint = _hint(opr)
    if f.get("format") == "NHWCD4":
        if len(ins) != 3:
            raise UnsupportedModelError(f"ConvBias in NHWCD4 with {len(ins)} inputs: "
                                        "megtrace reads x, filter and bias only")
        return list(g.add_node(get("conv_bias_nhwcd4"), ins,
                               {**params, "sparse": f["sparse"], "nonline": f["nonlineMode"]},
                               hint))
    if f.get("format", "NCHW") in _BLOCKED:
        if len(ins) != 3:
            raise UnsupportedModelError(f"ConvBias in {f['format']} with {len(ins)} inputs: "
                                        "megtrace reads x, filter and bias only")
        return list(g.add_node(get("conv_bias_nchwxx"), ins,
                               {**params, "nonline": f["nonlineMode"]}, hint))
    if len(ins) == 3:              # x, filter, bias: one conv_bias op
        return list(g.add_node(get("conv_bias"), ins, {**params, "nonline": f["nonlineMode"]},
                               hint))
    (y,) = g.add_node(get("conv2d"), ins[:2], params, hint)
    for extra in ins[2:4]:        # bias, then z
        y = _bin(g, "add", y, extra, hint)
    act = _NONLINE[f.get("nonlineMode")]
    return [_un(g, act, y, hint) if act else y]


# -- Reduce and AxisAddRemove ------------------------------------------------------------
@rule("ReduceV2")
def _reduce(g, opr, ins, _):
    from megtrace.ops.reduce import INT_MAX, MODE_BY_MGE
    f = _fields(opr)
    if f.get("mode") not in MODE_BY_MGE:
        raise UnsupportedOpError(f"Reduce mode {f.get('mode')} is not supported")
    x = ins[0]
    data_type = {0: "DEFAULT", 2: "DEFAULT", 3: "FLOAT_O16xC32"}[f.get("data_type", 0)]
    if f.get("data_type", 0) and (x.type.dtype == "float16") != (data_type == "FLOAT_O16xC32"):
        raise UnsupportedModelError(f"{opr.type}: param Reduce.data_type={f['data_type']!r} "
                                    f"is not supported on {x.type.dtype} input (megtrace "
                                    "computes FLOAT_O16xC32 on float16 input only)")
    if f.get("axis", INT_MAX) == INT_MAX:       # reduce to the shape given as 2nd input
        target = [int(d) for d in _const_value(g, ins[1], "Reduce target shape").reshape(-1)]
        if len(target) != x.type.ndim:
            if target != [1]:
                raise UnsupportedOpError(f"Reduce to shape {target} from {x.type}")
            (flat,) = g.add_node(get("reshape"), [x], {"shape": (-1,)}, _hint(opr))
            params = {"mode": MODE_BY_MGE[f["mode"]], "axis": 0, "keepdims": True,
                      "data_type": data_type}
            return list(g.add_node(get("reduce"), [flat], params, _hint(opr)))
        axis = tuple(i for i, (d, t) in enumerate(zip(x.type.shape, target)) if d != t)
    else:
        axis = f["axis"]
    params = {"mode": MODE_BY_MGE[f["mode"]], "axis": axis, "keepdims": True,
              "data_type": data_type}
    return list(g.add_node(get("reduce"), [x], params, _hint(opr)))


@rule("AxisAddRemove")
def _axis_add_remove(g, opr, ins, _):
    x = ins[0]
    for desc in _fields(opr).get("desc", []):
        name = "expand_dims" if desc["method"] == "ADD_1" else "squeeze"
        (x,) = g.add_node(get(name), [x], {"axis": (int(desc["axis"]),)}, _hint(opr))
    return [x]


@rule("LayerNorm")
def _layer_norm(g, opr, ins, _):
    f = _fields(opr)
    x = ins[0]
    nd = int(f.get("normalized_dim", 1))
    if len(ins) == 1 or not f.get("affine", True):
        shape = x.type.shape[x.type.ndim - nd:]
        ins = [x, g.add_const(np.ones(shape, x.type.dtype)), g.add_const(np.zeros(shape, x.type.dtype))]
    (y,) = g.add_node(get("layer_norm"), ins[:3], {"eps": float(f.get("eps", 1e-5)),
                                                    "normalized_dim": nd}, _hint(opr))
    return [y, None, None]        # mean and rstd are not modelled


@rule("Broadcast")
def _broadcast(g, opr, ins, _):
    shape = tuple(int(d) for d in _const_value(g, ins[1], "Broadcast target shape").reshape(-1))
    return list(g.add_node(get("broadcast_to"), ins[:1], {"shape": shape}, _hint(opr)))


@rule("AdaptivePoolingV1")
def _adaptive_pool(g, opr, ins, _):
    out = tuple(int(d) for d in _const_value(g, ins[1], "AdaptivePooling output size").reshape(-1))
    mode = "max" if _fields(opr).get("mode") == "MAX_" else "average"
    op = "adaptive_pool2d_nchwxx" if _fields(opr).get("format") in _BLOCKED else "adaptive_pool2d"
    return list(g.add_node(get(op), ins[:1], {"mode": mode, "out": out}, _hint(opr)))


@rule("ResizeV2")
def _resize(g, opr, ins, _):
    f = _fields(opr)
    if f.get("format") not in ("NCHW",) + _BLOCKED:
        raise UnsupportedOpError(f"Resize format {f.get('format')} is not supported")
    modes = {"NEAREST": "nearest", "LINEAR": "linear", "CUBIC": "cubic"}
    if f.get("imode") not in modes:
        raise UnsupportedOpError(f"Resize imode {f.get('imode')} is not supported")
    size = tuple(int(d) for d in _const_value(g, ins[1], "Resize output size").reshape(-1))
    op = "resize_nchwxx" if f["format"] in _BLOCKED else "resize"
    return list(g.add_node(get(op), ins[:1], {"size": size, "mode": modes[f["imode"]]},
                           _hint(opr)))


@rule("WarpPerspectiveV2")
def _warp_perspective(g, opr, ins, _):
    f = _fields(opr)
    if f.get("format") not in ("NCHW", "NHWC", "NHWC_NCHW") or f.get("imode") != "LINEAR":
        raise UnsupportedOpError(f"WarpPerspective format {f.get('format')} imode "
                                 f"{f.get('imode')} is not supported")
    out = tuple(int(d) for d in _const_value(g, ins[-1], "WarpPerspective output size")
                .reshape(-1))
    params = {"out": out, "border": f["bmode"], "border_val": float(f["border_val"])}
    if f["format"] != "NCHW":
        params["format"] = f["format"]
    if opr.output_dtype not in (None, ins[0].type.dtype):    # a fused TypeCvt (fuse_preprocess)
        if (ins[0].type.dtype, opr.output_dtype) != ("uint8", "float32"):
            raise UnsupportedModelError(f"WarpPerspective from {ins[0].type.dtype} to "
                                        f"{opr.output_dtype}: megtrace reads uint8 to float32 only")
        params["dtype"] = "float32"
    return list(g.add_node(get("warp_perspective"), ins[:-1], params, _hint(opr)))


@rule("WarpAffineV2")
def _warp_affine(g, opr, ins, _):
    f = _fields(opr)
    if f.get("imode") not in ("NEAREST", "LINEAR", "CUBIC", "LANCZOS4"):
        raise UnsupportedOpError(f"WarpAffine imode {f.get('imode')} is not supported")
    out = tuple(int(d) for d in _const_value(g, ins[-1], "WarpAffine output size").reshape(-1))
    return list(g.add_node(get("warp_affine"), ins[:-1], {
        "out": out, "border": f["border_mode"], "border_val": float(f["border_val"]),
        "format": f["format"], "imode": f["imode"]}, _hint(opr)))


@rule("Padding")
def _padding(g, opr, ins, _):
    f = _fields(opr)
    nd = ins[0].type.ndim
    widths = tuple((f[f"front_offset_dim{i}"], f[f"back_offset_dim{i}"]) for i in range(nd))
    mode = {"CONSTANT": "constant", "REFLECT": "reflect", "REPLICATE": "replicate"}[
        f["padding_mode"]]
    return list(g.add_node(get("pad"), ins[:1], {"pad_width": widths, "mode": mode,
                                                 "value": float(f["padding_val"])}, _hint(opr)))


@rule("TopK")
def _topk(g, opr, ins, _):
    f = _fields(opr)
    k = int(_const_value(g, ins[1], "TopK k").reshape(-1)[0])
    if k == 0:
        raise FormatError("TopK: k must not be 0")
    # megdnn's TopK takes at most the whole row when |k| exceeds its length
    k = int(np.sign(k)) * min(abs(k), ins[0].type.shape[-1])
    if f.get("mode") == "KTH_ONLY":
        (value,) = g.add_node(get("kth_value"), ins[:1], {"k": abs(k), "descending": k < 0},
                              _hint(opr))
        return [value] + [None] * (len(opr.outputs) - 1)
    # MegEngine's TopK is ascending for positive k; a negative k asks for the largest.
    values, indices = g.add_node(get("topk"), ins[:1], {"k": abs(k), "descending": k < 0},
                                 _hint(opr))
    return [values, indices]


def _index_items(g: Graph, opr: Opr, index_inputs: list[Var]):
    """IndexDescMaskDump items paired with their inputs (in item order, as MegBrain reads
    them): static (axis, begin, end, step, idx) rows and the (axis, index var) pairs."""
    values = iter(index_inputs)
    rows, vectors = [], []
    for it in _fields(opr).get("items", []):
        row = {}
        for key in ("begin", "end", "step", "idx"):
            if it[key]:
                var = next(values, None)
                if var is None:
                    raise FormatError(f"{opr.type}: fewer index inputs than its items need")
                row[key] = var
        axis = int(it["axis"])
        if "idx" in row and (row["idx"] not in g.consts or opr.type.startswith("Indexing")):
            vectors.append((axis, row.pop("idx")))
        if row:
            rows.append((axis, *[None if row.get(k) is None else int(
                _const_value(g, row[k], f"{opr.type} index").reshape(-1)[0])
                for k in ("begin", "end", "step", "idx")]))
    if next(values, None) is not None:
        raise FormatError(f"{opr.type}: more index inputs than its items use")
    return sorted(rows), sorted(vectors, key=lambda p: p[0])


_INDEXING_OPS = {"IndexingMultiAxisVec": "indexing_multi_axis_vec",
                 "IndexingSetMultiAxisVec": "indexing_set_multi_axis_vec",
                 "IndexingIncrMultiAxisVec": "indexing_incr_multi_axis_vec"}


@rule(*_INDEXING_OPS)
def _indexing(g, opr, ins, _):
    head = ins[:1] if opr.type == "IndexingMultiAxisVec" else ins[:2]
    rows, vectors = _index_items(g, opr, ins[len(head):])
    if not vectors:
        raise FormatError(f"{opr.type} without an index vector")
    slices = tuple((axis, b, e, s) for axis, b, e, s, _ in rows)
    return list(g.add_node(get(_INDEXING_OPS[opr.type]), head + [v for _, v in vectors],
                           {"slices": slices, "axes": tuple(a for a, _ in vectors)}, _hint(opr)))


@rule("SetSubtensor")
def _set_subtensor(g, opr, ins, _):
    rows, vectors = _index_items(g, opr, ins[2:])
    if vectors:
        raise UnsupportedOpError("SetSubtensor with an index computed in the graph: megtrace "
                                 "needs constant indices")
    return list(g.add_node(get("set_subtensor"), ins[:2], {"index": tuple(rows)}, _hint(opr)))


@rule("Argmax", "Argmin")
def _arg(g, opr, ins, _):
    mode = "max" if opr.type == "Argmax" else "min"
    return list(g.add_node(get("arg_reduce"), ins[:1], {"mode": mode,
                                                       "axis": _fields(opr).get("axis", 0),
                                                       "keepdims": True}, _hint(opr)))


from . import read_mha  # noqa: E402,F401  (registers the MultiHeadAttn rule)
