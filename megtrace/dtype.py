"""The dtype table: names, NumPy dtypes, TVM strings and MegEngine's file enum, in one place.

MegEngine computes in float32 and int32 by default; values coming from Python or NumPy
(float64, int64) are narrowed the way `megengine.tensor` does.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .errors import DTypeError


@dataclass(frozen=True)
class DTypeInfo:
    name: str          # MegEngine / NumPy spelling, e.g. "float32"
    short: str         # used in the IR's text form, e.g. "f32"
    mge_enum: int      # DTypeEnum value in .mge files


_TABLE = [
    DTypeInfo("float32", "f32", 0),
    DTypeInfo("uint8", "u8", 1),
    DTypeInfo("int8", "i8", 2),
    DTypeInfo("int16", "i16", 3),
    DTypeInfo("int32", "i32", 4),
    DTypeInfo("float16", "f16", 9),
    DTypeInfo("bool", "bool", 18),
    DTypeInfo("uint16", "u16", 19),
    # eager only: F.polar / F.complex; traces refuse it (TVM has no complex dtype)
    DTypeInfo("complex64", "c64", 21),
]
BY_NAME = {d.name: d for d in _TABLE}
BY_MGE_ENUM = {d.mge_enum: d for d in _TABLE}


def from_mge_enum(value: int | str) -> DTypeInfo:
    """A DTypeEnum given by number or by its schema name ("Int32", "Float16", "Bool")."""
    found = BY_MGE_ENUM.get(value) if isinstance(value, int) else BY_NAME.get(str(value).lower())
    if found is None:
        raise DTypeError(f"MegEngine dtype {value!r} is not supported by megtrace")
    return found

float32, int32, uint8, int8, int16, float16, bool_ = (
    "float32", "int32", "uint8", "int8", "int16", "float16", "bool")

_NARROW = {"float64": "float32", "int64": "int32", "uint64": "int32", "uint32": "int32",
           "complex128": "complex64"}


_CANONICAL: dict = {}     # memo: eager mode asks for every array of every op


def canonical(dtype) -> str:
    """Return the megtrace dtype name for anything NumPy accepts as a dtype."""
    try:
        return _CANONICAL[dtype]
    except (KeyError, TypeError):     # TypeError: unhashable
        pass
    name = _canonical(dtype)
    try:
        _CANONICAL[dtype] = name
    except TypeError:
        pass
    return name


_NAMES: dict = {}         # memo: NumPy computes dtype.name in Python on every access


def name_of(dtype: np.dtype) -> str:
    """`dtype.name` of a NumPy dtype, memoized (functionals ask on every op)."""
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = dtype.name
    return name


def _canonical(dtype) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError as e:
        raise DTypeError(f"dtype: {dtype!r} is not a dtype") from e
    name = _NARROW.get(name, name)
    if name not in BY_NAME:
        raise DTypeError(f"dtype: {name} is not supported; expected one of {sorted(BY_NAME)}")
    return name


def info(dtype: str) -> DTypeInfo:
    return BY_NAME[canonical(dtype)]


def as_array(value, dtype=None) -> np.ndarray:
    """Convert a Python/NumPy value into an array with a megtrace dtype. A quantized
    dtype (MegEngine's qint8, ...: metadata "mgb_dtype") is kept, its scale rounded to
    float32 as a tensor's is, the values cast to its storage as they are (MegEngine:
    `Tensor(data, dtype=qint8(s))` stores `data`)."""
    arr = np.asarray(value)
    quantized = _quantized(dtype) if dtype is not None else _quantized(arr.dtype)
    if quantized is not None:
        out = arr.astype(quantized, copy=False)
        out = out if out.flags.c_contiguous else out.copy()
        # NumPy's dtype equality ignores metadata: astype keeps the array's own quantization
        # where the storage matches (load_state_dict's values bring their scales), so the
        # float32 rounding of its scale is applied here
        own = _quantized(out.dtype)
        return out if own is None or own.metadata == out.dtype.metadata else out.view(own)
    target = canonical(dtype if dtype is not None else arr.dtype)
    out = arr.astype(target, copy=False)
    return out if out.flags.c_contiguous else out.copy()


@functools.lru_cache(maxsize=256)
def promote(*dtypes: str) -> str:
    """Result dtype of an elementwise op on tensors (float wins; never float64)."""
    return canonical(np.result_type(*dtypes))


@functools.lru_cache(maxsize=64)
def promote_elementwise(a: str, b: str) -> str:
    """Result dtype of an elementwise op on two tensors, MegEngine's `dtype_promotion`
    (src/core/impl/dtype.cpp): a dtype met by itself stays; beside another dtype float16
    counts as float32; dtypes of different kinds (bool, integer, float) give float32 (a
    bool mask times an int32 tensor is float32, not int32); of one kind, the wider. Signed
    with unsigned, which MegEngine refuses, takes NumPy's result."""
    if a == b:
        return a
    kinds = {name: np.dtype(name).kind for name in (a, b)}
    if kinds[a] in "iu" and kinds[b] in "iu":
        return promote(a, b)
    if kinds[a] != kinds[b] or "float16" in (a, b):
        return "float32"
    return max(a, b, key=lambda name: np.dtype(name).itemsize)


@functools.lru_cache(maxsize=64)
def is_float(dtype: str) -> bool:
    return np.issubdtype(np.dtype(dtype), np.floating)


# MegEngine's quantized dtypes (C names): the storage dtype and the file's DTypeEnum
QUANT_STORAGE = {"QuantizedS8": "int8", "Quantized8Asymm": "uint8", "QuantizedS32": "int32",
                 "QuantizedS4": "int8", "Quantized4Asymm": "uint8", "QuantizedS1": "int8",
                 "QuantizedS16": "int16"}
QUANT_ENUM = {"Quantized8Asymm": 11, "QuantizedS32": 12, "QuantizedS8": 13,
              "Quantized4Asymm": 14, "QuantizedS4": 15, "QuantizedS16": 16, "QuantizedS1": 20}
_QUANT_SHORT = {"QuantizedS8": "qs8", "Quantized8Asymm": "qu8", "QuantizedS32": "qs32",
                "QuantizedS4": "qs4", "Quantized4Asymm": "qu4", "QuantizedS1": "qs1",
                "QuantizedS16": "qs16"}


@dataclass(frozen=True)
class QuantParam:
    """The quantization of a value in the IR and in files: MegEngine's dtype name, scale
    and zero point (asymmetric dtypes only). The value itself is stored as `storage`."""

    name: str
    scale: float
    zero_point: int = 0

    @property
    def storage(self) -> str:
        return QUANT_STORAGE[self.name]

    @property
    def mge_enum(self) -> int:
        return QUANT_ENUM[self.name]

    @property
    def asymmetric(self) -> bool:
        return self.name in ("Quantized8Asymm", "Quantized4Asymm")

    def np_dtype(self) -> np.dtype:
        """The NumPy dtype of a tensor of this quantization. Its scale is the float32 value
        as a Python float, as MegEngine's tensors report it (their C++ dtype holds a float:
        `Tensor(x).astype(qint8(0.1)).dtype` says 0.10000000149011612, while qint8(0.1)
        itself keeps 0.1)."""
        meta = {"name": self.name, "scale": float(np.float32(self.scale))}
        if self.asymmetric:
            meta["zero_point"] = int(self.zero_point)
        return np.dtype(self.storage, metadata={"mgb_dtype": meta})

    @classmethod
    def of(cls, dtype) -> "QuantParam | None":
        """The QuantParam of a quantized NumPy dtype (None for any other dtype)."""
        meta = getattr(dtype, "metadata", None)
        if not meta or "mgb_dtype" not in meta:
            return None
        m = meta["mgb_dtype"]
        if m["name"] not in QUANT_STORAGE:
            raise DTypeError(f"quantized dtype {m['name']} is not supported")
        return cls(m["name"], float(m["scale"]), int(m.get("zero_point", 0)))

    def __str__(self) -> str:
        zp = f",{self.zero_point}" if self.asymmetric else ""
        return f"{_QUANT_SHORT[self.name]}({self.scale!r}{zp})"


BY_QUANT_ENUM = {v: k for k, v in QUANT_ENUM.items()}


def file_dtype(dtype) -> "str | QuantParam":
    """How a value's dtype is written in a .mge file: a QuantParam for MegEngine's
    quantized dtypes, else the megtrace dtype name."""
    q = QuantParam.of(dtype) if not isinstance(dtype, (str, QuantParam)) else None
    return q if q is not None else dtype if isinstance(dtype, QuantParam) else canonical(dtype)


def storage_of(dtype: "str | QuantParam") -> str:
    """The NumPy dtype name a file dtype's values are stored as."""
    return dtype.storage if isinstance(dtype, QuantParam) else dtype


def mge_enum_of(dtype: "str | QuantParam") -> int:
    return dtype.mge_enum if isinstance(dtype, QuantParam) else info(dtype).mge_enum


def read_file_dtype(enum: int, scale: float | None, zero_point: int = 0) -> "str | QuantParam":
    """A DType table's (type, LinearQuantizationParam) as a file dtype."""
    if enum in BY_QUANT_ENUM:
        name = BY_QUANT_ENUM[enum]
        if scale is None:
            raise DTypeError(f"quantized dtype {name} has no LinearQuantizationParam (scale)")
        return QuantParam(name, float(np.float32(scale)), int(zero_point))
    return from_mge_enum(enum).name


def _quantized(dtype) -> np.dtype | None:
    """`dtype` as a NumPy dtype when it is one of MegEngine's quantized dtypes."""
    meta = getattr(dtype, "metadata", None)
    if not meta or "mgb_dtype" not in meta:
        return None
    q = QuantParam.of(dtype)
    return dtype if q.np_dtype().metadata == meta else q.np_dtype()   # a tensor's scale is float32
