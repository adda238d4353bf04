"""`Tensor`: MegEngine's tensor on NumPy, which a trace can also record.

Outside a trace a Tensor is a NumPy array with MegEngine's dtypes and operators. Inside
one it also carries the IR `Var` that produced it; in symbolic traces it has no value
until the traced graph has run.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import device as _device
from . import dtype as _dt
from .errors import TraceError


class Tensor:
    __slots__ = ("_value", "_var", "_owner", "_version", "_device", "name", "__weakref__")
    __array_priority__ = 1000  # make `ndarray + Tensor` dispatch to Tensor.__radd__

    def __init__(self, data: Any = None, dtype: Any = None, device: str | None = None,
                 *, name: str | None = None):
        if isinstance(data, Tensor):
            data = data.numpy()
        if data is None:
            data = []
        if dtype is None and not isinstance(data, np.ndarray):
            arr = np.asarray(data)
            dtype = "float32" if arr.dtype.kind == "f" else None
        self._value = _dt.as_array(data, dtype)
        self._var = None
        self._owner = None
        self._version = 0
        self._device = _device.check(device)
        self.name = name
        from .dispatch import active_recorder
        rec = active_recorder()
        if rec is not None:
            rec.created(self)

    @classmethod
    def _wrap(cls, value: np.ndarray | None, var=None, owner=None) -> "Tensor":
        t = Tensor.__new__(Tensor)
        t._value, t._var, t._owner, t._version, t.name = value, var, owner, 0, None
        t._device = _device.get_default_device()
        return t

    # -- attributes -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        if self._var is None:
            return self._value.shape
        traced_shape = getattr(self._owner, "traced_shape", None)   # SymInts in a trace
        return traced_shape(self._var) if traced_shape else self._var.type.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._var.type.dtype if self._var is not None else self._value.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def device(self) -> str:
        return self._device

    def to(self, device: str) -> "Tensor":
        """A copy on `device` (values stay in host memory; the device picks TVM's target)."""
        return Tensor(self.numpy(), dtype=self.dtype, device=device)

    def numpy(self) -> np.ndarray:
        if self._value is None:
            if self._owner is not None:          # a traced tensor: its trace decides
                self._value = self._owner.read_value(self)
            else:
                raise TraceError("trace error because value unreadable: this tensor comes "
                                 "from a record_only trace and has no value")
        return self._value.copy()

    def item(self):
        return self.numpy().item()

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        return bool(self.numpy())

    def _scalar(self):
        """The one element, for int()/float() (MegEngine accepts any one-element shape)."""
        arr = self.numpy()
        if arr.size != 1:
            raise TypeError(f"only one-element tensors can be converted to Python scalars; "
                            f"got shape {arr.shape}")
        return arr.reshape(()).item()

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        body = "<symbolic>" if self._value is None else np.array2string(
            self._value, separator=", ", threshold=20)
        extra = "" if self.dtype == np.float32 else f", dtype={self.dtype.name}"
        shown = self.device if ":" in self.device else f"{self.device}:0"
        return f"Tensor({body}{extra}, device={shown})"

    # -- methods that are operators ---------------------------------------------------
    def astype(self, dtype) -> "Tensor":
        from . import functional as F
        return F.astype(self, dtype)

    def reshape(self, *shape) -> "Tensor":
        from . import functional as F
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return F.reshape(self, shape)

    def flatten(self, start_axis: int = 0, end_axis: int = -1) -> "Tensor":
        from . import functional as F
        return F.flatten(self, start_axis, end_axis)

    def __reduce__(self):
        return (type(self), (self.numpy(),), {"name": self.name} if self.name else None)

    def __setstate__(self, state):
        self.name = state.get("name")

    def _set_value(self, value: np.ndarray) -> None:
        """In-place update of a tensor's value (parameters, running statistics)."""
        self._value = _dt.as_array(value, self._value.dtype)
        self._version += 1


def _binary(name: str, reflected: bool = False):
    def method(self, other):
        from . import functional as F
        fn = getattr(F, name)
        return fn(other, self) if reflected else fn(self, other)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


for _dunder, _fname in (("add", "add"), ("sub", "sub"), ("mul", "mul"),
                        ("truediv", "div"), ("pow", "pow"), ("floordiv", "floor_div"),
                        ("mod", "mod"), ("matmul", "matmul"), ("and", "logical_and"),
                        ("or", "logical_or"), ("xor", "logical_xor")):
    setattr(Tensor, f"__{_dunder}__", _binary(_fname))
    setattr(Tensor, f"__r{_dunder}__", _binary(_fname, reflected=True))
for _dunder, _fname in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                        ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")):
    setattr(Tensor, f"__{_dunder}__", _binary(_fname))


def _functional():
    from . import functional
    return functional


def _reduction(mode: str):
    def method(self, axis=None, keepdims: bool = False) -> "Tensor":
        return getattr(_functional(), mode)(self, axis=axis, keepdims=keepdims)
    method.__name__ = mode
    return method


for _mode in ("sum", "mean", "max", "min", "prod"):
    setattr(Tensor, _mode, _reduction(_mode))
Tensor.__neg__ = lambda self: _functional().neg(self)
Tensor.__abs__ = lambda self: _functional().abs(self)
Tensor.__invert__ = lambda self: _functional().logical_not(self)
Tensor.__getitem__ = lambda self, key: __import__(
    "megtrace.functional.indexing", fromlist=["getitem"]).getitem(self, key)


def _transpose(self, *pattern) -> "Tensor":
    if len(pattern) == 1 and isinstance(pattern[0], (tuple, list)):
        pattern = pattern[0]
    if not pattern:
        pattern = tuple(range(self.ndim))[::-1]
    return _functional().transpose(self, pattern)


Tensor.transpose = _transpose
Tensor.T = property(lambda self: _transpose(self))


class Parameter(Tensor):
    """A Tensor a Module owns and trains; `trace` freezes it only with capture_as_const."""

    __slots__ = ()


def tensor(data: Any = None, dtype: Any = None, device: str | None = None) -> Tensor:
    """Create a Tensor (MegEngine's `megengine.tensor`); floats default to float32."""
    return Tensor(data, dtype=dtype, device=device)
