"""The operators that take MegEngine's quantized dtypes themselves: TypeCvt to and from
them (`quantized_astype`), ConvBias (`quantized_conv_bias`, F.quantized's
conv_bias_activation), ConvolutionBackwardData (`quantized_conv_transpose`, F.quantized's
conv_transpose2d) and ElemwiseMultiType's quantized modes (`quantized_elemwise`).

A quantized dtype travels in params as a tuple (MegEngine's name, scale, zero point),
a plain dtype as its name (`spec`/`param_of`). The eager arithmetic is
megtrace/ops/quantized_eager.py's (checked against real MegEngine 1.13); the Relax
lowerings compute the same integers: int32 accumulation, then MegEngine's TypeCvt in
float32 (q * scale, / out scale, round half away, saturate), step for step as eager, so
that the results are equal, not close."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtype as _dt
from ..dtype import QuantParam
from ..errors import DTypeError, ShapeError, UnsupportedOpError
from ..ir import TensorType
from . import quantized_eager as Q
from .conv import _transpose_geometry, conv_nd_eager, conv_transpose_nd_eager
from .quantized_lower import lower_centered, lower_dequantize, lower_quantize
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, get, register

DTypeSpec = Any     # tuple (name, scale, zero point) for quantized dtypes, else a dtype name


def spec(dtype) -> DTypeSpec:
    """A dtype (NumPy, quantized or not, or a name) as an op param."""
    q = QuantParam.of(np.dtype(dtype)) if not isinstance(dtype, (str, QuantParam)) else \
        dtype if isinstance(dtype, QuantParam) else None
    return (q.name, float(q.scale), int(q.zero_point)) if q is not None else _dt.canonical(dtype)


def param_of(s: DTypeSpec) -> QuantParam | None:
    return QuantParam(s[0], float(s[1]), int(s[2])) if isinstance(s, tuple) else None


def _type(shape, s: DTypeSpec) -> TensorType:
    q = param_of(s)
    return TensorType(shape, q.storage, q) if q is not None else TensorType(shape, s)


def _np_dtype(s: DTypeSpec) -> np.dtype:
    q = param_of(s)
    return q.np_dtype() if q is not None else np.dtype(s)


# -- quantized_astype: MegEngine's TypeCvt with a quantized source or target ------------
def _astype_infer(x, *, dtype):
    target = param_of(dtype)
    if target is None and x.quant is None:
        raise DTypeError(f"quantized_astype: neither {x} nor {dtype} is quantized (use astype)")
    return _type(x.shape, dtype)


def _astype_eager(x, *, dtype):
    return Q.typecvt(x, _np_dtype(dtype))


def _astype_lower(L, x, *, dtype):
    src, dst = L.types[0].quant, param_of(dtype)
    R = L.R
    v = lower_dequantize(L, x, src) if src is not None else \
        (x if L.types[0].dtype == "float32" else R.astype(x, "float32"))
    if dst is not None:
        return lower_quantize(L, v, dst)
    return v if dtype == "float32" else R.astype(v, dtype)


def _dtype_fields(s: DTypeSpec) -> dict:
    q = param_of(s)
    if q is None:
        return {"type": _dt.info(s).mge_enum}
    fields = {"type": q.mge_enum, "scale": float(np.float32(q.scale))}
    if q.asymmetric:
        fields["zero_point"] = q.zero_point
    return fields


def _dtype_decode(f: dict) -> dict:
    enum = f["type"] if isinstance(f["type"], int) else \
        _dt.QUANT_ENUM.get(f["type"]) or _dt.from_mge_enum(f["type"]).mge_enum
    return {"dtype": spec(_dt.read_file_dtype(enum, f.get("scale"), f.get("zero_point") or 0))}


TYPE_CVT = MgeOpr("TypeCvtV2", "DType")


def _astype_emit(em, types, p, inputs):
    return em.opr(TYPE_CVT, _dtype_fields(p["dtype"]), inputs)


def _read_type_cvt(g, opr, ins, _shapes):
    """TypeCvt: quantized_astype where the source or the target is quantized, else the
    plain astype."""
    fields = opr.params[0][1] if opr.params else {}
    params = _dtype_decode(fields)
    quantized = isinstance(params["dtype"], tuple) or ins[0].type.quant is not None
    op = get("quantized_astype") if quantized else get("astype")
    return list(g.add_node(op, ins, params, name_hint=opr.name or opr.type))


register(OpDef("quantized_astype", eager=_astype_eager, infer=_astype_infer,
               lower=_astype_lower, params={"dtype": "float32"},
               mge=MgeComposite(_astype_emit), mge_read={"TypeCvtV2": _read_type_cvt},
               vjp=NOT_DIFFERENTIABLE, quantized=True))


# -- quantized_conv_bias: ConvBias on quantized values ----------------------------------
_CONV_PARAMS = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1,
                "nonlinear_mode": "identity", "dtype": None}


def _acc_scale(x: QuantParam, w: QuantParam) -> float:
    return float(np.float32(x.scale) * np.float32(w.scale))


def _conv_infer(x, w, *bias, stride, padding, dilation, groups, nonlinear_mode, dtype):
    op = "quantized_conv_bias"
    if x.quant is None or w.quant is None:
        raise DTypeError(f"{op}: input and weight must be quantized; got {x} and {w}")
    if x.quant.name != w.quant.name:        # megdnn's mul_scale asserts equal enums
        raise DTypeError(f"{op}: input and weight must have the same quantized dtype kind "
                         f"(MegEngine multiplies their scales only then); got {x.quant.name} "
                         f"and {w.quant.name}")
    if x.ndim != 4:
        raise ShapeError(f"{op}: input must be 4-d NCHW; got {x}")
    want = 4 if groups == 1 else 5
    if w.ndim != want or (groups != 1 and w.shape[0] != groups):
        raise ShapeError(f"{op}: weight must be {want}-d with groups={groups}; got {w}")
    oc = w.shape[0] if groups == 1 else w.shape[0] * w.shape[1]
    ic, (kh, kw) = (w.shape[1] if groups == 1 else w.shape[0] * w.shape[2]), w.shape[-2:]
    if ic != x.shape[1]:
        raise ShapeError(f"{op}: input has {x.shape[1]} channels, the weight expects {ic}")
    if bias:
        b = bias[0]
        if b.quant is None or b.quant.name != "QuantizedS32" or b.size != oc:
            raise DTypeError(f"{op}: bias must be QuantizedS32 with {oc} values; got {b}")
    if str(nonlinear_mode).lower() not in ("identity", "relu", "h_swish"):
        raise UnsupportedOpError(f"{op}: nonlinear_mode {nonlinear_mode!r} on quantized "
                                  "dtypes; megtrace has identity, relu and h_swish")
    oh = (x.shape[2] + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"{op}: the kernel does not fit the input {x}")
    shape = (x.shape[0], oc, oh, ow)
    if dtype is None:
        return TensorType(shape, "int32", QuantParam("QuantizedS32",
                                                     _acc_scale(x.quant, w.quant)))
    return _type(shape, dtype)


def _centered(arr: np.ndarray) -> np.ndarray:
    return Q.storage(arr).astype(np.int64) - int(Q.mgb_meta(arr.dtype).get("zero_point", 0))


def eager_conv_epilogue(acc, x, w, bias, nonlinear_mode, dtype):
    """ConvBias after the int32 accumulation `acc` of x and w, in NumPy: the bias, the
    nonlinearity and the TypeCvt to `dtype` (Q.conv_bias at the accumulator's scale)."""
    scale = _acc_scale(QuantParam.of(x.dtype), QuantParam.of(w.dtype))
    return Q.conv_bias(acc, bias[0] if bias else None, scale, nonlinear_mode,
                       None if dtype is None else _np_dtype(dtype))


def _conv_eager(x, w, *bias, stride, padding, dilation, groups, nonlinear_mode, dtype):
    wg = w[None] if groups == 1 else w
    acc = conv_nd_eager(_centered(x), _centered(wg), tuple(stride), tuple(padding),
                        tuple(dilation))
    return eager_conv_epilogue(acc, x, w, bias, nonlinear_mode, dtype)


def _conv_lower(L, x, w, *bias, stride, padding, dilation, groups, nonlinear_mode, dtype):
    R = L.R
    tx, tw = L.types[0], L.types[1]
    wi = lower_centered(L, w, tw.quant)
    if groups != 1:
        g, ocg, icg, kh, kw = tw.shape
        wi = R.reshape(wi, (g * ocg, icg, kh, kw))
    acc = R.nn.conv2d(lower_centered(L, x, tx.quant), wi, strides=tuple(stride),
                      padding=tuple(padding), dilation=tuple(dilation), groups=int(groups),
                      out_dtype="int32")
    return lower_conv_epilogue(L, acc, bias, nonlinear_mode, dtype)


def lower_conv_epilogue(L, acc, bias, nonlinear_mode, dtype):
    """ConvBias after the int32 accumulation (inputs 0 and 1 the quantized input and
    weight): the bias added, the nonlinearity, the TypeCvt to `dtype`, as Q.conv_bias."""
    R = L.R
    tx, tw = L.types[0], L.types[1]
    if str(nonlinear_mode).lower() == "h_swish":
        raise UnsupportedOpError(
            "quantized_conv_bias: nonlinear_mode 'h_swish' cannot be compiled: its float32 "
            "h_swish of the int32 accumulator may differ from MegEngine's by one ulp, which "
            "moves quantized results (it runs eagerly); use identity and a quantized "
            "Elemwise('h_swish') instead")
    if bias:
        acc = R.add(acc, R.reshape(bias[0], (1, L.out.shape[1], 1, 1)))
    if str(nonlinear_mode).lower() == "relu":
        acc = R.maximum(acc, L.const(np.int32(0), "int32"))
    if dtype is None:
        return acc
    acc_q = QuantParam("QuantizedS32", _acc_scale(tx.quant, tw.quant))
    out = param_of(dtype)
    if out is None:
        return R.astype(lower_dequantize(L, acc, acc_q), dtype)
    return lower_quantize(L, lower_dequantize(L, acc, acc_q), out)


def _conv_fields(p: dict) -> dict:
    return {"nonlineMode": str(p["nonlinear_mode"]).upper(), "mode": "CROSS_CORRELATION",
            "sparse": "DENSE" if p["groups"] == 1 else "GROUP", "format": "NCHW",
            "pad_h": p["padding"][0], "pad_w": p["padding"][1],
            "stride_h": p["stride"][0], "stride_w": p["stride"][1],
            "dilate_h": p["dilation"][0], "dilate_w": p["dilation"][1],
            "compute_mode": "DEFAULT"}


def conv_bias_params(fields: dict, groups: int, dtype: DTypeSpec | None) -> dict:
    """A ConvBias opr's param table as quantized_conv_bias's params."""
    if fields.get("mode", "CROSS_CORRELATION") != "CROSS_CORRELATION" or \
            fields.get("format", "NCHW") != "NCHW":
        raise UnsupportedOpError("ConvBias on quantized dtypes: megtrace reads NCHW "
                                  "cross-correlation only")
    mode = str(fields.get("nonlineMode", "IDENTITY")).lower()
    return {"stride": (fields["stride_h"], fields["stride_w"]),
            "padding": (fields["pad_h"], fields["pad_w"]),
            "dilation": (fields["dilate_h"], fields["dilate_w"]), "groups": groups,
            "nonlinear_mode": mode, "dtype": dtype}


CONV_BIAS = MgeOpr("ConvBiasForward", "ConvBias", fields=_conv_fields,
                   extra=(("ExecutionPolicy", {}),))


def conv_bias_emitter(opr: MgeOpr, infer):
    """How a quantized conv-with-bias op (`infer` its shape rule) is written as `opr`
    (ConvBias, BatchConvBias): with its output dtype; without a bias, a zero QuantizedS32
    one (MegEngine's kernels check a missing bias against the output dtype's scale and
    refuse)."""
    def emit(em, types, p, inputs):
        out = infer(*types, **p)
        if len(inputs) == 2:
            acc = QuantParam("QuantizedS32", _acc_scale(types[0].quant, types[1].quant))
            zero = np.zeros((1, out.shape[1], 1, 1), np.int32).view(acc.np_dtype())
            inputs = [*inputs, em.const(zero)]
        return em.opr(opr, _conv_fields(p), inputs,
                      output_dtype=_dt.file_dtype(out.np_dtype))
    return emit


register(OpDef("quantized_conv_bias", eager=_conv_eager, infer=_conv_infer,
               lower=_conv_lower, params=_CONV_PARAMS,
               mge=MgeComposite(conv_bias_emitter(CONV_BIAS, _conv_infer)),
               vjp=NOT_DIFFERENTIABLE, quantized=True))


# -- quantized_elemwise: ElemwiseMultiType's quantized modes ----------------------------
# MegEngine's ElemwiseMultiType mode numbers (dnn/scripts/opr_param_defs.py) -> the
# registry's float op; `exact`: modes whose float32 Relax result equals NumPy's bit for
# bit (so the quantized integers do), compiled as float arithmetic; the others compile
# as a lookup table of eager's results where the inputs are 8-bit
EMT_MODES = {"qadd": (6, "add"), "qfuse_add_relu": (7, "fuse_add_relu"), "qmul": (8, "mul"),
             "qmin": (9, "minimum"), "qmax": (10, "maximum"), "qsub": (11, "sub"),
             "qtrue_div": (12, "div"), "qfuse_add_sigmoid": (13, "fuse_add_sigmoid"),
             "qfuse_add_tanh": (14, "fuse_add_tanh"), "qrelu": (15, "relu"),
             "qabs": (16, "abs"), "qsigmoid": (17, "sigmoid"), "qexp": (18, "exp"),
             "qtanh": (19, "tanh"), "qnegate": (22, "neg"), "qcos": (26, "cos"),
             "qsin": (31, "sin"), "qfuse_mul_add3": (20, "fuse_mul_add3"),
             "qfast_tanh": (21, "fast_tanh"), "qceil": (25, "ceil"), "qfloor": (28, "floor"),
             "qlog": (29, "log"), "qround": (32, "round"), "qerf": (33, "erf"),
             "qpow": (46, "pow"), "qcond_leq_mov": (50, "cond_leq_mov"),
             "qh_swish": (51, "hswish"), "qfuse_add_h_swish": (52, "fuse_add_h_swish")}
EMT_BY_NUMBER = {n: m for m, (n, _) in EMT_MODES.items()}
_EXACT = {"qadd", "qfuse_add_relu", "qmul", "qmin", "qmax", "qsub", "qtrue_div", "qrelu",
          "qabs", "qnegate", "qfloor", "qceil", "qround", "qcond_leq_mov"}


def _float_op(mode: str):
    if mode not in EMT_MODES:
        raise UnsupportedOpError(f"quantized_elemwise: mode {mode!r}; megtrace has "
                                  f"{sorted(EMT_MODES)}")
    return get(EMT_MODES[mode][1])


def _emt_infer(*xs, mode, dtype):
    op = _float_op(mode)
    if param_of(dtype) is None:
        raise DTypeError(f"quantized_elemwise: dtype must be quantized; got {dtype!r}")
    for t in xs:
        if t.quant is None:
            raise DTypeError(f"quantized_elemwise: {mode} takes quantized inputs; got {t}")
    (out,) = op.infer_types([TensorType(t.shape, "float32") for t in xs], {})
    return _type(out.shape, dtype)


def _emt_eager(*xs, mode, dtype):
    values = [Q.dequantize(x) for x in xs]
    (out,) = _float_op(mode).run_eager(values, {})
    return Q.quantize(out, _np_dtype(dtype))


class _FloatCtx:
    """The LowerContext of the float op inside: float32 types of the same shapes."""

    def __init__(self, L, types):
        self.R, self.bb = L.R, L.bb
        self.types = [TensorType(t.shape, "float32") for t in types]
        self.out = TensorType(L.out.shape, "float32")
        self.outs = [self.out]
        self.const, self.normalize = L.const, L.normalize


_TABLE_LIMIT = 1 << 16      # one or two 8-bit inputs


def _emt_table(types, mode: str, dtype) -> np.ndarray | None:
    """The mode's result for every combination of the inputs' stored values, computed by
    the eager rule (so a compiled graph gives eager's integers bit for bit, whatever
    TVM's float32 sigmoid or tanh would round to); None where that is too many values."""
    ranges = [Q._RANGE[t.quant.name] for t in types]
    if np.prod([hi - lo + 1 for lo, hi in ranges], dtype=np.float64) > _TABLE_LIMIT:
        return None
    grids = np.meshgrid(*[np.arange(lo, hi + 1) for lo, hi in ranges], indexing="ij")
    values = [Q.attach(g.ravel(), t.quant.np_dtype()) for g, t in zip(grids, types)]
    with np.errstate(all="ignore"):     # combinations outside the domain (log of -1)
        return Q.storage(_emt_eager(*values, mode=mode, dtype=dtype))


def _emt_lower(L, *xs, mode, dtype):
    if mode not in _EXACT:
        return _emt_lower_table(L, xs, mode, dtype)
    values = [L.normalize(lower_dequantize(L, x, t.quant)) for x, t in zip(xs, L.types)]
    v = _float_op(mode).lower(_FloatCtx(L, L.types), *values)
    return lower_quantize(L, v, param_of(dtype))


def _emt_lower_table(L, xs, mode, dtype):
    """Modes whose float32 Relax result may differ from NumPy's by an ulp (sigmoid, tanh,
    exp, ...): a lookup in the table of every input combination, indexed by the stored
    values (row-major over the inputs, as _emt_table lays it out)."""
    R = L.R
    table = _emt_table(L.types, mode, dtype)
    if table is None:
        raise UnsupportedOpError(
            f"quantized_elemwise: mode {mode!r} on {', '.join(t.quant.name for t in L.types)} "
            "cannot be compiled: TVM's float32 {0} may differ from NumPy's by one ulp, which "
            "moves quantized results, and a table of every input combination is larger than "
            "{1} entries (one or two 8-bit inputs); megtrace compiles {2} on any "
            "input".format(mode[1:], _TABLE_LIMIT, sorted(_EXACT)))
    index, stride = None, 1
    for x, t in reversed(list(zip(xs, L.types))):
        lo, hi = Q._RANGE[t.quant.name]
        term = R.subtract(R.astype(x, "int32"), L.const(lo, "int32"))
        if stride != 1:
            term = R.multiply(term, L.const(stride, "int32"))
        index = term if index is None else R.add(term, index)
        stride *= hi - lo + 1
    # in range by construction; "clip" spares TVM's warning about unchecked indices
    return R.take(L.const(table, str(table.dtype)), index, axis=0, mode="clip")


def _emt_emit(em, types, p, inputs):
    out = _emt_infer(*types, **p)
    return em.opr(ELEMWISE_MULTI_TYPE, {"mode": EMT_MODES[p["mode"]][0]}, inputs,
                  output_dtype=_dt.file_dtype(out.np_dtype))


ELEMWISE_MULTI_TYPE = MgeOpr("ElemwiseMultiType", "ElemwiseMultiType")

def _read_emt(g, opr, ins, _shapes):
    fields = opr.params[0][1] if opr.params else {}
    mode = EMT_BY_NUMBER.get(int(fields.get("mode", 0)))
    if mode is None:
        raise UnsupportedOpError(f"ElemwiseMultiType mode {fields.get('mode')}: megtrace reads "
                                  f"the quantized modes {sorted(EMT_MODES)}")
    if opr.output_dtype is None or not isinstance(opr.output_dtype, QuantParam):
        raise UnsupportedOpError(f"ElemwiseMultiType {mode} without a quantized output dtype")
    return list(g.add_node(get("quantized_elemwise"), ins,
                           {"mode": mode, "dtype": spec(opr.output_dtype)},
                           name_hint=opr.name or opr.type))


register(OpDef("quantized_elemwise", eager=_emt_eager, infer=_emt_infer, lower=_emt_lower,
               params={"mode": "qadd", "dtype": None}, mge=MgeComposite(_emt_emit),
               mge_read={"ElemwiseMultiType": _read_emt}, vjp=NOT_DIFFERENTIABLE,
               quantized=True))


# -- quantized_conv_transpose: ConvolutionBackwardData on quantized values --------------
_DECONV_PARAMS = {"stride": (1, 1), "padding": (0, 0), "output_padding": (0, 0),
                  "dilation": (1, 1), "dtype": None}


def _deconv_infer(x, w, *, stride, padding, output_padding, dilation, dtype):
    op = "quantized_conv_transpose"
    if x.quant is None or w.quant is None or x.quant.name != w.quant.name:
        raise DTypeError(f"{op}: input and weight must have the same quantized dtype kind; "
                         f"got {x} and {w}")
    if w.ndim != 4:
        raise ShapeError(f"{op}: weight must be 4-d (IC, OC, KH, KW); got {w}")
    _, ocg, out = _transpose_geometry(op, 2, x, w, stride, padding, output_padding, dilation)
    shape = (x.shape[0], ocg) + tuple(out)
    if dtype is None:
        return TensorType(shape, "int32", QuantParam("QuantizedS32",
                                                     _acc_scale(x.quant, w.quant)))
    return _type(shape, dtype)


def _deconv_eager(x, w, *, stride, padding, output_padding, dilation, dtype):
    acc = conv_transpose_nd_eager(_centered(x), _centered(w)[None], tuple(stride),
                                  tuple(padding), tuple(output_padding), tuple(dilation))
    scale = _acc_scale(QuantParam.of(x.dtype), QuantParam.of(w.dtype))
    return Q.conv_bias(acc, None, scale, "identity",
                       None if dtype is None else _np_dtype(dtype))


def _deconv_lower(L, x, w, *, stride, padding, output_padding, dilation, dtype):
    R = L.R
    tx, tw = L.types
    acc = R.nn.conv2d_transpose(lower_centered(L, x, tx.quant), lower_centered(L, w, tw.quant),
                                strides=tuple(stride), padding=tuple(padding),
                                output_padding=tuple(output_padding),
                                dilation=tuple(dilation), out_dtype="int32")
    if dtype is None:
        return acc
    acc_q = QuantParam("QuantizedS32", _acc_scale(tx.quant, tw.quant))
    out = param_of(dtype)
    v = lower_dequantize(L, acc, acc_q)
    return lower_quantize(L, v, out) if out is not None else R.astype(v, dtype)


DECONV = MgeOpr("ConvolutionBackwardData", "Convolution", extra=(("ExecutionPolicy", {}),))


def _deconv_emit(em, types, p, inputs):
    """MegEngine's input order (weight, input), the output dtype in the opr config."""
    if any(p["output_padding"]):
        raise UnsupportedOpError("quantized_conv_transpose: output_padding cannot be written "
                                 "yet (MegEngine takes the output shape as a third input)")
    out = _deconv_infer(*types, **p)
    fields = {"sparse": "DENSE", "pad_h": p["padding"][0], "pad_w": p["padding"][1],
              "stride_h": p["stride"][0], "stride_w": p["stride"][1],
              "dilate_h": p["dilation"][0], "dilate_w": p["dilation"][1]}
    return em.opr(DECONV, fields, [inputs[1], inputs[0]],
                  output_dtype=_dt.file_dtype(out.np_dtype))


register(OpDef("quantized_conv_transpose", eager=_deconv_eager, infer=_deconv_infer,
               lower=_deconv_lower, params=_DECONV_PARAMS, mge=MgeComposite(_deconv_emit),
               vjp=NOT_DIFFERENTIABLE, quantized=True))
