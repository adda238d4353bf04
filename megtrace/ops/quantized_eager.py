"""Eager arithmetic on MegEngine's quantized dtypes (qint8, quint8, qint32, qint4, quint4,
qint1): NumPy integer arrays whose dtype carries `metadata["mgb_dtype"]` (name, scale,
zero point), as MegEngine stores them.

MegEngine's semantics, checked against real MegEngine 1.13 (tests/data/quantized/):
- TypeCvt float -> quantized: round half away from zero of x / scale, plus the zero
  point, saturated to the dtype's range; quantized -> float: (q - zero point) * scale in
  float32; quantized -> quantized goes through float32; quantized -> int/float16: the
  dequantized value cast as usual.
- Layout operators (reshape, concat, subtensor, pad, ...) move the stored integers and keep
  the dtype. add/sub/neg/relu/maximum/minimum and sum/max/min reductions compute on the
  stored integers (C wrap-around) when every quantized input has the same dtype, and keep
  it. matmul of two quantized inputs accumulates in int32: QuantizedS32 with the product
  of the scales.
- Max/average pooling (adaptive too) and nearest resizing keep the dtype; averages of the
  stored values are rounded half away from zero.
- ConvBias / BatchConvBias / ConvolutionBackwardData (module.quantized): int32
  accumulation, the qint32 bias added, the nonlinearity applied, then converted to the
  output dtype like TypeCvt (`conv_bias`).
Every other operator refuses quantized inputs (MegEngine has no such kernel)."""
from __future__ import annotations

import numpy as np

from .rounding import round_half_away

# MegEngine's C dtype name -> (min, max) of the values it stores
_RANGE = {
    "QuantizedS8": (-128, 127), "Quantized8Asymm": (0, 255), "QuantizedS32": (-2 ** 31, 2 ** 31 - 1),
    "QuantizedS4": (-8, 7), "Quantized4Asymm": (0, 15), "QuantizedS1": (0, 1),
    "QuantizedS16": (-2 ** 15, 2 ** 15 - 1),
}
_SCALE_TOLERANCE = 1e-6     # MegEngine's dtype_promotion: |scale0 - scale1| < 1e-6

# operators that only move or select stored values: the result keeps the input dtype
LAYOUT_OPS = frozenset({
    "reshape", "transpose", "expand_dims", "squeeze", "broadcast_to", "flatten", "concat",
    "subtensor", "copy", "pad", "indexing_multi_axis_vec", "set_subtensor",
    "indexing_set_multi_axis_vec", "gather", "take", "sliding_window",
})
# integer arithmetic MegEngine's Elemwise/Reduce kernels run on quantized storage
INTEGER_OPS = frozenset({"add", "sub", "neg", "relu", "maximum", "minimum", "fuse_add_relu"})
_REDUCE_MODES = frozenset({"sum", "max", "min"})
# pooling on stored values: max selects one; averages are rounded half away from zero
POOL_OPS = frozenset({"pool2d", "adaptive_pool2d"})


def mgb_meta(dtype) -> dict | None:
    """The `mgb_dtype` metadata of a quantized NumPy dtype, else None."""
    meta = dtype.metadata
    return meta.get("mgb_dtype") if meta else None


def is_quantized_array(arr) -> bool:
    return isinstance(arr, np.ndarray) and mgb_meta(arr.dtype) is not None


def storage(arr: np.ndarray) -> np.ndarray:
    """The stored integers as a plain NumPy array (the metadata dropped)."""
    return arr.view(np.dtype(arr.dtype.str))


def attach(values: np.ndarray, qdtype: np.dtype) -> np.ndarray:
    """`values` (integers) stored as the quantized dtype `qdtype` (a 0-d result stays 0-d:
    np.ascontiguousarray would make it 1-d)."""
    return np.asarray(values, order="C").astype(np.dtype(qdtype.str), copy=False).view(qdtype)


def scale_of(dtype) -> float:
    return float(mgb_meta(dtype)["scale"])


def _zero_point(meta: dict) -> int:
    return int(meta.get("zero_point", 0))


def quantize(values: np.ndarray, qdtype: np.dtype) -> np.ndarray:
    """float32 values -> `qdtype` (MegEngine's TypeCvt: round half away, saturate)."""
    meta = mgb_meta(qdtype)
    lo, hi = _RANGE[meta["name"]]
    q = round_half_away(np.asarray(values, np.float32) / np.float32(meta["scale"]))
    q = q.astype(np.float64) + _zero_point(meta)
    with np.errstate(invalid="ignore"):     # NaN (qpow of a negative base): x86's cast
        return attach(np.clip(q, lo, hi).astype(np.int64), qdtype)


def dequantize(arr: np.ndarray) -> np.ndarray:
    """Quantized array -> float32 values ((q - zero point) * scale)."""
    meta = mgb_meta(arr.dtype)
    values = storage(arr).astype(np.float32)
    zp = _zero_point(meta)
    if zp:
        values = values - np.float32(zp)
    return values * np.float32(meta["scale"])


def typecvt(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """MegEngine's TypeCvt where the source or the target is quantized."""
    dtype = np.dtype(dtype)
    source = dequantize(arr) if is_quantized_array(arr) else arr
    if mgb_meta(dtype) is not None:
        return quantize(source, dtype)
    return source.astype(dtype)


def same_dtype(op: str, dtypes) -> np.dtype:
    """The one quantized dtype of an integer op's inputs (MegEngine: equal names and
    scales within 1e-6), else the error MegEngine's dtype promotion raises."""
    first = dtypes[0]
    m0 = mgb_meta(first)
    for d in dtypes[1:]:
        m = mgb_meta(d)
        if m is None or m["name"] != m0["name"]:
            raise TypeError(f"{op}: cannot mix quantized dtype {m0['name']} with "
                            f"{m['name'] if m else d.name} (convert with astype first)")
        if abs(m["scale"] - m0["scale"]) >= _SCALE_TOLERANCE or \
                _zero_point(m) != _zero_point(m0):
            raise ValueError(f"{op}: quantized inputs have different scales "
                             f"({m0['scale']} vs {m['scale']}); MegEngine requires "
                             "|scale0 - scale1| < 1e-6 (requantize with astype first)")
    return first


def run(op, arrays: list, kwargs: dict) -> tuple:
    """Run registry op `op` eagerly on inputs of which at least one is quantized."""
    name = op.name
    qdtypes = [a.dtype for a in arrays if is_quantized_array(a)]
    if name == "astype":
        return (typecvt(arrays[0], np.dtype(kwargs["dtype"])),)
    if name == "matmul" and len(qdtypes) == 2 and len(arrays) == 2:
        return (_matmul(op, arrays, kwargs),)
    if name in LAYOUT_OPS:
        qdtype = same_dtype(name, qdtypes)
        plain = [storage(a) if is_quantized_array(a) else a for a in arrays]
        outs = op.run_eager(plain, kwargs)
        return tuple(attach(o, qdtype) if o.dtype == np.dtype(qdtype.str) else o
                     for o in outs)
    if name in POOL_OPS or (name == "resize" and kwargs.get("mode") == "nearest"):
        return (_pool(op, arrays, kwargs),)
    if name in INTEGER_OPS or (name == "reduce" and kwargs.get("mode") in _REDUCE_MODES):
        if len(qdtypes) != len(arrays):
            raise TypeError(f"{name}: MegEngine does not mix quantized and non-quantized "
                            "inputs; convert with astype first")
        qdtype = same_dtype(name, qdtypes)
        with np.errstate(over="ignore"):
            outs = op.run_eager([storage(a) for a in arrays], kwargs)
        return tuple(attach(o, qdtype) for o in outs)
    raise NotImplementedError(
        f"{name} on quantized dtype {mgb_meta(qdtypes[0])['name']}: MegEngine has no such "
        "kernel; dequantize with astype('float32') first (or use the quantized "
        "functionals: F.quantized.conv_bias_activation, _elemwise_multi_type)")


def _pool(op, arrays, kwargs) -> np.ndarray:
    """Pooling / nearest resize of one quantized input: computed on the stored values in
    float64 (exact), averages rounded half away from zero, the dtype kept."""
    if len(arrays) != 1:
        raise NotImplementedError(f"{op.name} on quantized dtypes takes one input")
    arr = arrays[0]
    meta = mgb_meta(arr.dtype)
    values = op.run_eager([storage(arr).astype(np.float64)], kwargs)[0]
    lo, hi = _RANGE[meta["name"]]
    return attach(np.clip(round_half_away(values), lo, hi).astype(np.int64), arr.dtype)


def _matmul(op, arrays, kwargs) -> np.ndarray:
    a, b = arrays
    ma, mb = mgb_meta(a.dtype), mgb_meta(b.dtype)
    plain = [storage(x).astype(np.int64) - _zero_point(m) for x, m in ((a, ma), (b, mb))]
    out = op.run_eager(plain, kwargs)[0]
    scale = float(np.float32(ma["scale"]) * np.float32(mb["scale"]))
    return attach(out.astype(np.int32), qint32_dtype(scale))


def qint32_dtype(scale: float) -> np.dtype:
    return np.dtype("int32", metadata={"mgb_dtype": {"name": "QuantizedS32", "scale": scale}})


def _conv_h_swish(acc, bias, acc_scale: float, out_dtype) -> np.ndarray:
    """MegEngine's CPU H_SWISH epilogue (fallback FuseAddHSwishOp / HSwishOp from qint32):
    accumulator and bias each times its scale in float32, h_swish, then times the
    reciprocal of the output scale (not divided by it, as TypeCvt does) and rounded."""
    from .elemwise import hswish_float32     # elemwise imports the registry, which imports us
    f32 = np.float32
    z = acc.astype(f32) * f32(acc_scale)
    if bias is not None:
        z = z + storage(bias).astype(f32) * f32(scale_of(bias.dtype))
    out = np.dtype(out_dtype) if out_dtype is not None else qint32_dtype(acc_scale)
    meta = mgb_meta(out)
    lo, hi = _RANGE[meta["name"]]
    q = round_half_away(hswish_float32(z) * (f32(1) / f32(meta["scale"])))
    return attach(np.clip(q.astype(np.float64) + _zero_point(meta), lo, hi).astype(np.int64),
                  out)


def conv_bias(acc: np.ndarray, bias: np.ndarray | None, acc_scale: float,
              nonlinear_mode: str, out_dtype) -> np.ndarray:
    """The epilogue of MegEngine's quantized ConvBias: int32 accumulator plus the qint32
    bias, the nonlinearity, then TypeCvt from QuantizedS32(acc_scale) to `out_dtype`
    (None: QuantizedS32 itself)."""
    total = acc.astype(np.int64)
    if bias is not None:
        bmeta = mgb_meta(bias.dtype)
        if bmeta is None or bmeta["name"] != "QuantizedS32":
            raise TypeError("conv_bias_activation: bias must be QuantizedS32 (qint32 with "
                            "scale = input scale * weight scale)")
        total = total + storage(bias).astype(np.int64)
    mode = str(nonlinear_mode).lower()
    if mode == "h_swish":
        return _conv_h_swish(acc, bias, acc_scale, out_dtype)
    if mode == "relu":
        total = np.maximum(total, 0)
    elif mode not in ("identity",):
        raise NotImplementedError(f"conv_bias_activation: nonlinear_mode {nonlinear_mode!r} "
                                  "on quantized dtypes; megtrace has identity, relu and h_swish")
    q32 = attach(np.clip(total, -2 ** 31, 2 ** 31 - 1), qint32_dtype(acc_scale))
    if out_dtype is None:
        return q32
    return typecvt(q32, np.dtype(out_dtype))
