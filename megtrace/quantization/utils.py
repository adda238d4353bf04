"""Quantization parameters (`QParams`, which every Tensor carries and pickles as
MegEngine's do) and the fake-quantization primitives the observers, fake quantizers and
QAT modules share (MegEngine's megengine.quantization.utils)."""
from __future__ import annotations

import abc
from enum import Enum
from functools import partial, update_wrapper, wraps
from typing import Any, Union

import numpy as np

from ..autodiff.function import Function
from ..core.tensor.dtype import QuantDtypeMeta, _builtin_quant_dtypes, create_quantized_dtype
from ..dispatch import apply
from ..tensor import Tensor


class QuantMode(Enum):
    """MegEngine's quantization modes (its spelling)."""

    SYMMERTIC = 1
    ASYMMERTIC = 2


class QParams:
    """mode, dtype_meta, scale and zero_point of a quantized tensor (any may be None)."""

    __slots__ = "mode", "dtype_meta", "scale", "zero_point"

    def __init__(self, mode: QuantMode | None, dtype_meta: Any, scale: Any, zero_point: Any):
        self.mode = mode
        self.dtype_meta = dtype_meta
        self.scale = scale
        self.zero_point = zero_point

    def update(self, qparams: "QParams") -> None:
        for key in self.__slots__:
            setattr(self, key, getattr(qparams, key))

    def __eq__(self, other) -> bool:
        if not isinstance(other, QParams) or len(self.__slots__) != len(other.__slots__):
            return False
        return all(getattr(self, k) is getattr(other, k) or getattr(self, k) == getattr(other, k)
                   for k in self.__slots__)

    __hash__ = None

    def __repr__(self) -> str:
        return "QParams({})".format(", ".join(f"{k}={getattr(self, k)}" for k in self.__slots__))

    def __getstate__(self):
        return None, {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state) -> None:
        slots = state[1] if isinstance(state, tuple) else state
        for k, v in (slots or {}).items():
            setattr(self, k, v)


class LSQParams(QParams):
    """LSQ's qparams: QParams plus the gradient scale of the step size."""

    __slots__ = "mode", "dtype_meta", "scale", "zero_point", "grad_scale"

    def __init__(self, mode, dtype_meta, scale, zero_point, grad_scale):
        super().__init__(mode, dtype_meta, scale, zero_point)
        self.grad_scale = grad_scale


class QParamsModuleMixin(abc.ABC):
    """Observers and fake quantizers: `get_qparams`, and the quantized dtype it implies."""

    def get_quantized_dtype(self) -> np.dtype:
        qparams = self.get_qparams()
        scale = float(qparams.scale.numpy()) if qparams.scale is not None else None
        zero_point = int(qparams.zero_point.numpy()) if qparams.zero_point is not None \
            else None
        return create_quantized_dtype(qparams.dtype_meta, scale, zero_point)

    @abc.abstractmethod
    def get_qparams(self) -> QParams:
        pass


def create_qparams(mode: QuantMode | None = QuantMode.SYMMERTIC,
                   dtype_meta: Union[str, QuantDtypeMeta, None] = None,
                   scale: Any = None, zero_point: Any = None) -> QParams:
    """QParams of `mode` (None allowed); a dtype given by name is looked up."""
    if isinstance(dtype_meta, str):
        dtype_meta = _builtin_quant_dtypes[dtype_meta]
    if mode is not None and not isinstance(mode, QuantMode):
        raise TypeError(f"create_qparams: mode must be a QuantMode or None; got {mode!r}")
    return QParams(mode, dtype_meta, scale, zero_point)


class Round(Function):
    """round with a straight-through gradient (F.round has none), for QAT."""

    def forward(self, x):
        return apply("round", x)

    def backward(self, output_grads):
        return output_grads


def _f32(value) -> Tensor:
    return value if isinstance(value, Tensor) else Tensor(np.asarray(value, np.float32))


def tqt_forward(qmin: int, qmax: int, inp: Tensor, scale: Tensor) -> Tensor:
    """TQT fake quantization with the log2 threshold `scale` (learnable)."""
    return apply("tqt", inp, _f32(scale), qmin=int(qmin), qmax=int(qmax))


def lsq_forward(qmin: int, qmax: int, inp: Tensor, step_size: Tensor, zero_point=None,
                scale_grad=None) -> Tensor:
    """LSQ fake quantization with the learnable `step_size`."""
    zero_point = Tensor(np.array([0.0], np.float32)) if zero_point is None else zero_point
    scale_grad = Tensor(np.array([1.0], np.float32)) if scale_grad is None else scale_grad
    return apply("lsq", inp, _f32(step_size), _f32(zero_point), _f32(scale_grad),
                 qmin=int(qmin), qmax=int(qmax))


def register_method_to_class(cls):
    """Decorator: add the function as a method of `cls` (MegEngine's helper)."""
    def decorator(func):
        @wraps(func)
        def wrapper(self, *args, **kwargs):
            return func(self, *args, **kwargs)
        if isinstance(func, partial):
            update_wrapper(func, func.func)
        setattr(cls, func.__name__, wrapper)
        return func
    return decorator


def fake_quant_tensor(inp: Tensor, qparams: QParams) -> Tensor:
    """Fake-quantize `inp` with the scale (and, asymmetric, zero point) of `qparams`."""
    if qparams.mode == QuantMode.ASYMMERTIC:
        zero_point = _f32(qparams.zero_point)
    else:
        zero_point = Tensor(np.array([0.0], np.float32))
    meta = qparams.dtype_meta
    return apply("fake_quant", inp, _f32(qparams.scale), zero_point,
                 qmin=int(meta.qmin), qmax=int(meta.qmax))


def fake_quant_bias(bias: Tensor, inp: Tensor, w_qat: Tensor) -> Tensor:
    """Fake-quantize a bias to qint32 with scale = input scale * weight scale (symmetric
    int8 input and weight only; otherwise the bias is returned as it is)."""
    if bias is None or getattr(inp, "qparams", None) is None or \
            getattr(w_qat, "qparams", None) is None:
        return bias
    inp_params, w_params = inp.qparams, w_qat.qparams
    if inp_params.scale is None or w_params.scale is None:
        return bias
    if inp_params.mode != QuantMode.SYMMERTIC or inp_params.mode != w_params.mode:
        return bias
    if inp_params.dtype_meta is None or w_params.dtype_meta is None or \
            inp_params.dtype_meta.np_dtype_str != "int8" or \
            w_params.dtype_meta.np_dtype_str != "int8":
        return bias
    b_param = create_qparams(w_params.mode, _builtin_quant_dtypes["qint32"],
                             scale=inp_params.scale * w_params.scale)
    b_qat = fake_quant_tensor(bias, b_param)
    b_qat.qparams.update(b_param)
    return b_qat
