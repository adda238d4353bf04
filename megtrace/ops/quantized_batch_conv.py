"""`quantized_batch_conv_bias`: MegEngine's BatchConvBias (F.quantized's
batch_conv_bias_activation): sample n of the batch is convolved with its own weight
weight[n], weight (N, OC, IC, KH, KW), then ConvBias's epilogue (qint32 bias,
nonlinearity, TypeCvt). Eager, traced (a grouped convolution over the batch folded into
channels: int32 accumulation, so the integers are the eager ones) and dumped as
BatchConvBiasForward, read back from MegEngine's files too."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedOpError
from ..ir import TensorType
from .conv import conv_nd_eager
from .quantized import (_CONV_PARAMS, _centered, _conv_infer, conv_bias_emitter,
                        conv_bias_params, eager_conv_epilogue, lower_conv_epilogue, spec)
from .quantized_lower import lower_centered
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, get, register

_OP = "quantized_batch_conv_bias"


def _infer(x, w, *bias, stride, padding, dilation, groups, nonlinear_mode, dtype):
    if groups != 1:
        raise UnsupportedOpError(f"{_OP}: groups must be 1 (MegEngine's BatchConvBias is "
                                 "dense)")
    if w.ndim != 5 or x.ndim != 4 or w.shape[0] != x.shape[0]:
        raise ShapeError(f"{_OP}: input (N, IC, H, W) and weight (N, OC, IC, KH, KW) must "
                         f"share N; got {x} and {w}")
    per_sample = TensorType(w.shape[1:], w.dtype, w.quant)
    return _conv_infer(x, per_sample, *bias, stride=stride, padding=padding,
                       dilation=dilation, groups=1, nonlinear_mode=nonlinear_mode, dtype=dtype)


def _eager(x, w, *bias, stride, padding, dilation, groups, nonlinear_mode, dtype):
    xc, wc = _centered(x), _centered(w)
    acc = np.concatenate([conv_nd_eager(xc[n:n + 1], wc[n][None], tuple(stride),
                                        tuple(padding), tuple(dilation))
                          for n in range(x.shape[0])])
    return eager_conv_epilogue(acc, x, w, bias, nonlinear_mode, dtype)


def _lower(L, x, w, *bias, stride, padding, dilation, groups, nonlinear_mode, dtype):
    """The batch folded into channels: one convolution with N groups."""
    R = L.R
    tx, tw = L.types[0], L.types[1]
    n, ic, h, wd = tx.shape
    _, oc, _, kh, kw = tw.shape
    xi = R.reshape(lower_centered(L, x, tx.quant), (1, n * ic, h, wd))
    wi = R.reshape(lower_centered(L, w, tw.quant), (n * oc, ic, kh, kw))
    acc = R.nn.conv2d(xi, wi, strides=tuple(stride), padding=tuple(padding),
                      dilation=tuple(dilation), groups=n, out_dtype="int32")
    acc = R.reshape(acc, L.out.shape)
    return lower_conv_epilogue(L, acc, bias, nonlinear_mode, dtype)


BATCH_CONV_BIAS = MgeOpr("BatchConvBiasForward", "BatchConvBias",
                         extra=(("ExecutionPolicy", {}),))


def _read(g, opr, ins, _shapes):
    if len(ins) > 3:
        raise UnsupportedOpError("BatchConvBias with a z input: megtrace reads x, filter and "
                                 "bias only")
    if ins[0].type.quant is None:
        raise UnsupportedOpError("BatchConvBias on float inputs: megtrace reads the quantized "
                                 "opr (F.quantized.batch_conv_bias_activation)")
    fields = opr.params[0][1] if opr.params else {}
    if fields.get("sparse", "DENSE") != "DENSE":
        raise UnsupportedOpError("BatchConvBias: megtrace reads sparse=DENSE only")
    dtype = spec(opr.output_dtype) if opr.output_dtype is not None else None
    params = conv_bias_params(fields, 1, dtype)
    return list(g.add_node(get(_OP), ins, params, name_hint=opr.name or opr.type))


register(OpDef(_OP, eager=_eager, infer=_infer, lower=_lower, params=_CONV_PARAMS,
               mge=MgeComposite(conv_bias_emitter(BATCH_CONV_BIAS, _infer)), mge_read={"BatchConvBiasForward": _read},
               vjp=NOT_DIFFERENTIABLE, quantized=True))
