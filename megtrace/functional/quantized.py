"""`F.quantized`: MegEngine's inference-only quantized convolutions (ConvBias,
BatchConvBias, ConvolutionBackwardData on qint8 tensors) with integer accumulation, as
registry ops: eager (megtrace/ops/quantized_eager.py's arithmetic), traced and dumped."""
from __future__ import annotations

from typing import Tuple, Union

from ..dispatch import apply
from ..ops import quantized_eager as Q
from ..ops.quantized import spec
from ..tensor import Tensor

__all__ = ["conv_bias_activation", "batch_conv_bias_activation", "conv_transpose2d"]

IntPair = Union[int, Tuple[int, int]]


def _pair(name: str, v, nonzero: bool = False) -> tuple[int, int]:
    out = tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v), int(v))
    if len(out) != 2 or (nonzero and min(out) <= 0) or min(out) < 0:
        raise ValueError(f"{name} must be {'a positive' if nonzero else 'a non-negative'} "
                         f"int or a pair of them; got {v!r}")
    return out


def _quantized_tensor(fn: str, what: str, t: Tensor) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {what} must be a Tensor; got {type(t).__name__}")
    if Q.mgb_meta(t.dtype) is None:
        raise TypeError(f"{fn}: {what} must have a quantized dtype (qint8, quint8, ...); "
                        f"got {t.dtype}")
    return t


def _check_modes(fn: str, conv_mode: str, compute_mode: str,
                 convolution_too: bool = False) -> None:
    """`convolution_too`: MegEngine 1.13's CPU ConvBias on quantized dtypes computes a
    cross-correlation whichever conv_mode it is given (checked: "convolution" gives the
    same integers), so conv_bias_activation accepts both and computes them the same way."""
    modes = ("cross_correlation", "convolution") if convolution_too else ("cross_correlation",)
    if str(conv_mode).lower() not in modes:
        raise NotImplementedError(f"{fn}: conv_mode {conv_mode!r}; megtrace runs "
                                  f"{' and '.join(map(repr, modes))}")
    if str(compute_mode).lower() != "default":
        raise ValueError(f"{fn}: compute_mode must be 'default' for quantized dtypes; got "
                         f"{compute_mode!r}")


def conv_bias_activation(inp: Tensor, weight: Tensor, bias: Tensor, dtype=None,
                         stride: IntPair = 1, padding: IntPair = 0, dilation: IntPair = 1,
                         groups: int = 1, nonlinear_mode="identity",
                         conv_mode="cross_correlation", compute_mode="default") -> Tensor:
    """Quantized conv2d + bias + activation (MegEngine's ConvBias): int32 accumulation of
    the int8 input and weight, the qint32 bias (scale = input scale * weight scale) added,
    `nonlinear_mode` ("identity", "relu" or "h_swish") applied, the result converted to
    `dtype` (the quantized_conv_bias op: eager, traced and dumped; h_swish eager only)."""
    fn = "conv_bias_activation"
    _check_modes(fn, conv_mode, compute_mode, convolution_too=True)
    tensors = [_quantized_tensor(fn, "inp", inp), _quantized_tensor(fn, "weight", weight)]
    if bias is not None:
        tensors.append(_quantized_tensor(fn, "bias", bias))
    return apply("quantized_conv_bias", *tensors, stride=_pair("stride", stride, True),
                 padding=_pair("padding", padding), dilation=_pair("dilation", dilation, True),
                 groups=int(groups), nonlinear_mode=str(nonlinear_mode).lower(),
                 dtype=None if dtype is None else spec(dtype))


def batch_conv_bias_activation(inp: Tensor, weight: Tensor, bias: Tensor, dtype=None,
                               stride: IntPair = 1, padding: IntPair = 0,
                               dilation: IntPair = 1, groups: int = 1,
                               nonlinear_mode="identity", conv_mode="cross_correlation",
                               compute_mode="default") -> Tensor:
    """MegEngine's BatchConvBias: like `conv_bias_activation`, but sample n of the batch
    is convolved with its own weight `weight[n]` (weight: (N, OC, IC, KH, KW)); the
    quantized_batch_conv_bias op: eager, traced and dumped."""
    fn = "batch_conv_bias_activation"
    _check_modes(fn, conv_mode, compute_mode)
    if int(groups) != 1:
        raise NotImplementedError(f"{fn}: groups must be 1")
    tensors = [_quantized_tensor(fn, "inp", inp), _quantized_tensor(fn, "weight", weight)]
    if bias is not None:
        tensors.append(_quantized_tensor(fn, "bias", bias))
    return apply("quantized_batch_conv_bias", *tensors, stride=_pair("stride", stride, True),
                 padding=_pair("padding", padding), dilation=_pair("dilation", dilation, True),
                 groups=1, nonlinear_mode=str(nonlinear_mode).lower(),
                 dtype=None if dtype is None else spec(dtype))


def conv_transpose2d(inp: Tensor, weight: Tensor, bias: Tensor = None, dtype=None,
                     stride: IntPair = 1, padding: IntPair = 0, output_padding: IntPair = 0,
                     dilation: IntPair = 1, groups: int = 1, conv_mode="cross_correlation",
                     compute_mode="default") -> Tensor:
    """Quantized transposed convolution (MegEngine's ConvolutionBackwardData on qint8):
    weight (IC, OC, KH, KW), int32 accumulation, converted to `dtype` (the
    quantized_conv_transpose op: eager, traced and dumped)."""
    fn = "conv_transpose2d"
    _check_modes(fn, conv_mode, compute_mode)
    if groups != 1:
        raise NotImplementedError("group quantized transposed conv2d is not supported yet.")
    if bias is not None:
        raise NotImplementedError("bias of quantized transposed conv2d is not supported yet.")
    x = _quantized_tensor(fn, "inp", inp)
    w = _quantized_tensor(fn, "weight", weight)
    if x.ndim != 4 or w.ndim != 4 or w.shape[0] != x.shape[1]:
        raise ValueError(f"{fn}: inp (N, IC, H, W) and weight (IC, OC, KH, KW) do not "
                         f"match: {x.shape} vs {w.shape}")
    s = _pair("stride", stride, True)
    op = _pair("output_padding", output_padding)
    if op[0] == 0:          # MegEngine applies it only when its height part is non-zero
        op = (0, 0)
    if op[0] >= s[0] or op[1] >= s[1]:
        raise ValueError("output_padding must be less than stride")
    return apply("quantized_conv_transpose", x, w, stride=s,
                 padding=_pair("padding", padding), output_padding=op,
                 dilation=_pair("dilation", dilation, True),
                 dtype=None if dtype is None else spec(dtype))
