"""MegEngine's quantized dtypes: NumPy integer dtypes carrying MegEngine's dtype name,
scale and zero point in `dtype.metadata["mgb_dtype"]`, exactly as
`megengine.core.tensor.dtype` builds them, and the metadata (`QuantDtypeMeta`) that
observers and fake quantizers use (name, C name, storage dtype, range)."""
from __future__ import annotations

from collections import namedtuple
from typing import Union

import numpy as np


class QuantDtypeMeta(namedtuple("QuantDtypeMeta",
                                ["name", "cname", "np_dtype_str", "qmin", "qmax",
                                 "is_unsigned"])):
    """Metadata of a quantized dtype. Copies are the object itself, so that `is`
    comparisons (FakeQuantize checks `qparams.dtype_meta is self.dtype`) survive deepcopy."""

    def __new__(cls, name: str, cname: str | None, np_dtype_str: str, qmin: int, qmax: int,
                is_unsigned: bool | None = None):
        assert isinstance(np_dtype_str, str)
        if is_unsigned is None:
            is_unsigned = np_dtype_str[0] == "u"
        return super().__new__(cls, name, cname, np_dtype_str, qmin, qmax, is_unsigned)

    def __copy__(self):
        return self

    def __deepcopy__(self, _memo):
        return self


_builtin_quant_dtypes = {
    "quint8": QuantDtypeMeta("quint8", "Quantized8Asymm", "uint8", 0, 255),
    "qint8": QuantDtypeMeta("qint8", "QuantizedS8", "int8", -128, 127),
    "qint8_narrow": QuantDtypeMeta("qint8_narrow", "QuantizedS8", "int8", -127, 127),
    "quint4": QuantDtypeMeta("quint4", "Quantized4Asymm", "uint8", 0, 15),
    "qint4": QuantDtypeMeta("qint4", "QuantizedS4", "int8", -8, 7),
    "qint1": QuantDtypeMeta("qint1", "QuantizedS1", "int8", 0, 1),
    "qint32": QuantDtypeMeta("qint32", "QuantizedS32", "int32", -(2 ** 31), 2 ** 31 - 1),
    "quint2": QuantDtypeMeta("quint2", None, "uint8", 0, 3),
    "qint2": QuantDtypeMeta("qint2", None, "int8", -2, 1),
}


def is_quantize(dtype) -> bool:
    """Whether `dtype` is one of MegEngine's quantized dtypes."""
    meta = getattr(np.dtype(dtype), "metadata", None) if dtype is not None else None
    return bool(meta) and "mgb_dtype" in meta


def _mgb_meta(dtype) -> dict:
    if not is_quantize(dtype):
        raise ValueError(f"dtype {dtype!r} is not a quantized dtype")
    return np.dtype(dtype).metadata["mgb_dtype"]


def get_scale(dtype) -> float:
    """The scale of a quantized dtype."""
    return _mgb_meta(dtype)["scale"]


def get_zero_point(dtype) -> int:
    """The zero point of an asymmetric quantized dtype."""
    meta = _mgb_meta(dtype)
    if "zero_point" not in meta:
        raise ValueError(f"dtype {meta['name']} has no zero_point")
    return meta["zero_point"]


def is_dtype_equal(a, b) -> bool:
    """Same storage dtype and, for quantized dtypes, same MegEngine name and parameters."""
    if a is None or b is None:
        return a is b
    a, b = np.dtype(a), np.dtype(b)
    if is_quantize(a) or is_quantize(b):
        return is_quantize(a) and is_quantize(b) and a == b and _mgb_meta(a) == _mgb_meta(b)
    return a == b


def get_dtype_bit(dtype_name: str) -> int:
    """Bits of a dtype named like "qint8", "float16" ("bool": 1)."""
    if dtype_name == "bool":
        return 1
    digits = "".join(c if c.isdigit() else " " for c in dtype_name).split()
    assert len(digits) == 1, "Unsupport dtype name with more than one number."
    return int(digits[0])


def is_lowbit(dtype) -> bool:
    """Whether `dtype` is one of MegEngine's packed 1/2/4-bit integer dtypes (intb1, intb2,
    intb4), which megtrace does not have: always False (qint4 is not one of them; MegEngine
    1.13 says False for it too)."""
    return False


def _check_zero_point(zp: int, dtype_meta: QuantDtypeMeta) -> None:
    if zp < dtype_meta.qmin or zp > dtype_meta.qmax:
        raise ValueError("zero_point should be within [{}, {}] for {}".format(
            dtype_meta.qmin, dtype_meta.qmax, dtype_meta.name))


def create_quantized_dtype(dtype_meta: QuantDtypeMeta, scale: float,
                           zp: Union[int, None]) -> np.dtype:
    """The NumPy dtype of `dtype_meta` with `scale` (and `zp`, unsigned dtypes only)."""
    if dtype_meta.cname is None:
        raise ValueError("dtype {} without cname attr is not supported.")
    if dtype_meta.is_unsigned:
        if zp is None or int(zp) != zp:
            raise ValueError("zero_point should be an integer")
        zp = int(zp)
        _check_zero_point(zp, dtype_meta)
        meta = {"name": dtype_meta.cname, "scale": float(scale), "zero_point": zp}
    else:
        if zp is not None:
            raise ValueError(
                "'{}' only supports symmetric quantization, zero_point should be None, "
                "but actually got '{}'".format(dtype_meta.name, zp))
        meta = {"name": dtype_meta.cname, "scale": float(scale)}
    return np.dtype(dtype_meta.np_dtype_str, metadata={"mgb_dtype": meta})


def quint8(scale: float, zero_point: int) -> np.dtype:
    """float value = scale * (uint8 value - zero_point)."""
    return create_quantized_dtype(_builtin_quant_dtypes["quint8"], scale, zero_point)


def qint8(scale: float) -> np.dtype:
    """float value = scale * int8 value."""
    return create_quantized_dtype(_builtin_quant_dtypes["qint8"], scale, None)


def qint32(scale: float) -> np.dtype:
    """float value = scale * int32 value."""
    return create_quantized_dtype(_builtin_quant_dtypes["qint32"], scale, None)


def quint4(scale: float, zero_point: int) -> np.dtype:
    return create_quantized_dtype(_builtin_quant_dtypes["quint4"], scale, zero_point)


def qint4(scale: float) -> np.dtype:
    return create_quantized_dtype(_builtin_quant_dtypes["qint4"], scale, None)


def qint1(scale: float) -> np.dtype:
    return create_quantized_dtype(_builtin_quant_dtypes["qint1"], scale, None)


def _convert_to_quantized_dtype(arr: np.ndarray, dtype: np.dtype, dtype_meta: QuantDtypeMeta):
    if not isinstance(arr, np.ndarray):
        raise ValueError("arr parameter should be instance of np.ndarray")
    if not is_quantize(dtype) or dtype.metadata["mgb_dtype"]["name"] != dtype_meta.cname:
        raise ValueError("dtype parameter should be a {} dtype".format(dtype_meta))
    meta = dtype.metadata["mgb_dtype"]
    q = np.round(arr / meta["scale"])
    if dtype_meta.is_unsigned:
        q = q + meta["zero_point"]
    return q.clip(dtype_meta.qmin, dtype_meta.qmax).astype(dtype)


def _convert_from_quantized_dtype(arr: np.ndarray, dtype_meta: QuantDtypeMeta):
    if not isinstance(arr, np.ndarray):
        raise ValueError("arr parameter should be instance of np.ndarray")
    if not is_quantize(arr.dtype) or arr.dtype.metadata["mgb_dtype"]["name"] != dtype_meta.cname:
        raise ValueError("arr's dtype should be a {} dtype".format(dtype_meta))
    meta = arr.dtype.metadata["mgb_dtype"]
    values = arr.astype(np.float32)
    if dtype_meta.is_unsigned:
        values = values - meta["zero_point"]
    return values * meta["scale"]


def _converters(name: str):
    meta = _builtin_quant_dtypes[name]

    def to(arr: np.ndarray, q: np.dtype):
        return _convert_to_quantized_dtype(arr, q, meta)

    def from_(arr: np.ndarray):
        return _convert_from_quantized_dtype(arr, meta)
    to.__name__, from_.__name__ = f"convert_to_{name}", f"convert_from_{name}"
    to.__doc__ = f"Quantize a float ndarray into a {name} one (round, clip, cast)."
    from_.__doc__ = f"Dequantize a {name} ndarray into a float32 one."
    return to, from_


convert_to_quint8, convert_from_quint8 = _converters("quint8")
convert_to_qint8, convert_from_qint8 = _converters("qint8")
convert_to_qint32, convert_from_qint32 = _converters("qint32")
convert_to_quint4, convert_from_quint4 = _converters("quint4")
convert_to_qint4, convert_from_qint4 = _converters("qint4")
convert_to_qint1, convert_from_qint1 = _converters("qint1")
