"""`Tensor`: MegEngine's tensor on NumPy, which a trace can also record.

Outside a trace a Tensor is a NumPy array with MegEngine's dtypes and operators. Inside
one it also carries the IR `Var` that produced it; in symbolic traces it has no value
until the traced graph has run. As in MegEngine, `tensor` is the class itself.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from . import device as _device
from . import dtype as _dt
from . import formats as _formats
from .errors import TraceError

_NO_DATA = object()     # pickle's NEWOBJ of an old MegEngine file: __setstate__ fills it
_FORMATS = ("default", "nchw", "nhwc")
_NP_DTYPES: dict[str, np.dtype] = {}     # a traced value's dtype name -> NumPy's dtype


class Tensor:
    """A multidimensional array of one dtype on one device (MegEngine's `Tensor`).

    `Tensor(data, dtype=None, device=None, is_const=False, no_cache=False, name=None,
    format="default")`: Python ints become int32, floats float32 (NumPy's 64-bit types are
    narrowed the same way); from another Tensor the value is shared, and a different
    `dtype`/`device` than that tensor's is a RuntimeError, as in MegEngine.
    """

    __slots__ = ("_value", "_var", "_owner", "_version", "_device", "_name", "_qparams",
                 "_format", "_ad", "__dict__", "__weakref__")
    __array_priority__ = 1001  # make `ndarray + Tensor` dispatch to Tensor.__radd__
    grad = None

    def __new__(cls, data: Any = _NO_DATA, dtype: Any = None, device: Any = None,
                is_const: bool = False, no_cache: bool = False, name: str | None = None,
                format: str = "default"):
        self = object.__new__(cls)
        self._var = self._owner = self._ad = None
        self._version, self._name, self._qparams = 0, "", None
        self._format = _check_format(format)
        if data is _NO_DATA:
            self._value, self._device = np.zeros((0,), np.float32), _device.as_device(None)
            return self
        if isinstance(data, Tensor):
            self._share(data, dtype, device)
            if format != "default" and format != data._format:
                raise RuntimeError(f"format mismatch: {format} vs {data._format}")
            self._format = data._format      # MegEngine: a tensor from a tensor keeps its format
            if data._var is None:        # an eager value: inside a trace, a constant
                _created_in_trace(self)
            return self
        if data is None:         # MegEngine: an empty tensor
            data = np.zeros((0,), np.float32 if dtype is None else None)
        if isinstance(data, (tuple, list)) and _traced_shape_value(self, data, dtype, device):
            return self
        if dtype is None and not isinstance(data, (np.ndarray, np.generic)):
            arr = np.asarray(data)     # Python floats: float32 (a NumPy scalar keeps its own)
            dtype = "float32" if arr.dtype.kind == "f" else None
        value = _dt.as_array(data, dtype)
        if isinstance(data, np.ndarray) and np.may_share_memory(value, data):
            value = value.copy()    # MegEngine copies: later writes to `data` stay there
        self._value = value
        self._device = _device.as_device(device)
        _created_in_trace(self)
        return self

    def __init__(self, data: Any = _NO_DATA, dtype: Any = None, device: Any = None,
                 is_const: bool = False, no_cache: bool = False, name: str | None = None,
                 format: str = "default"):
        if data is _NO_DATA:
            raise TypeError("Tensor.__init__() missing 1 required positional argument: 'data'")
        if name is not None:
            self._name = name

    def _share(self, other: "Tensor", dtype, device) -> None:
        if dtype is not None and _dt.canonical(dtype) != other.dtype.name:
            raise RuntimeError(f"dtype mismatch: {np.dtype(_dt.canonical(dtype)).name} vs "
                               f"{other.dtype.name}")
        if device is not None:
            want = _device.as_device(device)
            if want.physical_name != other.device.physical_name:
                raise RuntimeError(f"device mismatch: {want!r} vs {other.device!r}")
        self._value, self._var, self._owner = other._value, other._var, other._owner
        self._device, self._ad = other._device, other._ad

    @classmethod
    def _wrap(cls, value: np.ndarray | None, var=None, owner=None, device=None) -> "Tensor":
        # jit/replay.py's Replayer.record sets these same fields inline (a new field
        # goes there too; tests/test_trace_replay_fast.py compares the two)
        t = object.__new__(Tensor)
        if value is not None and type(value) is not np.ndarray:   # NumPy scalars from 0-d results
            value = np.asarray(value)
        t._value, t._var, t._owner, t._version = value, var, owner, 0
        t._name, t._qparams, t._format, t._ad = "", None, "default", None
        t._device = device if device is not None else _device.as_device(None)
        return t

    # -- attributes -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        if self._var is None:
            return self._value.shape
        traced_shape = getattr(self._owner, "traced_shape", None)   # SymInts in a trace
        return traced_shape(self._var) if traced_shape else self._var.type.shape

    @property
    def _tuple_shape(self) -> tuple[int, ...]:
        """The shape as a plain tuple even where `shape` may not be one (MegEngine code
        reads it; in megtrace `shape` always is)."""
        return tuple(self.shape)

    @property
    def dtype(self) -> np.dtype:
        var = self._var
        if var is None:
            value = self._value      # an ndarray's dtype is already the np.dtype
            return value.dtype if value is not None else np.dtype(None)
        vtype = var.type
        if vtype.quant is not None:      # MegEngine's quantized dtypes
            return vtype.np_dtype
        found = _NP_DTYPES.get(vtype.dtype)
        if found is None:
            found = _NP_DTYPES[vtype.dtype] = np.dtype(vtype.dtype)
        return found

    @property
    def ndim(self) -> int:
        var = self._var
        return self._value.ndim if var is None else len(var.type.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:    # not np.prod: a NumPy call on a tuple costs ~3 us
            n *= int(d)
        return n

    @property
    def device(self) -> _device.CompNode:
        return self._device

    @property
    def format(self) -> str:
        return self._format

    @format.setter
    def format(self, format: str) -> None:
        self._format = _check_format(format)

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, name: str | None) -> None:
        self._name = "" if name is None else name

    @property
    def qparams(self):
        """Quantization parameters (MegEngine's QParams; created empty on first access)."""
        if self._qparams is None:
            from .quantization.utils import create_qparams
            self._qparams = create_qparams()
        return self._qparams

    def to(self, device, *, _borrow: bool = False) -> "Tensor":
        """A copy on `device` (values stay in host memory; the device picks TVM's target)."""
        if isinstance(device, str) and not _device._valid(device):
            raise ValueError(f"invalid device name {device}. For the correct format of the "
                             "device name, please refer to the instruction of "
                             "megengine.device.set_default_device()")
        t = self.detach()
        t._device = _device.as_device(device)
        return t

    def detach(self) -> "Tensor":
        """A new Tensor with the same value, which no gradient flows through."""
        t = Tensor._wrap(self._value, self._var, self._owner, self._device)
        return t

    def numpy(self) -> np.ndarray:
        if self._value is None:
            if self._owner is not None:          # a traced tensor: its trace decides
                self._value = self._owner.read_value(self)
            else:
                raise TraceError.because("value unreadable", "this tensor comes from a "
                                         "record_only trace and has no value")
        return self._value.copy()

    def item(self, *args):
        """The value of a one-element tensor as a Python number (`x.item(i, j)`: of x[i, j])."""
        if args:
            return self[args].item()
        assert self.size == 1
        return self.numpy().item()

    def tolist(self):
        return self.numpy().tolist()

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """NumPy ufuncs on Tensors (np.add(t, a)) give a Tensor on t's device."""
        return type(self)(np.asarray(array), dtype=np.asarray(array).dtype, device=self.device)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("ndim is 0")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        return bool(self.item())

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

    def __index__(self) -> int:
        return self._scalar().__index__()

    def __complex__(self) -> complex:
        return complex(self._scalar())

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        if self._value is None and self._owner is None:
            body = "<symbolic>"
        else:
            with np.printoptions(precision=4, suppress=False):
                body = str(self.numpy())
        extra = "" if self.dtype == np.float32 else f", dtype={self.dtype.name}"
        return f"{type(self).__name__}({body}{extra}, device={self.device})"

    # -- pickling (MegEngine's format: NEWOBJ(value, dtype, device) + state) ------------
    def __getnewargs__(self):
        return self.numpy(), self.dtype, self.device.logical_name

    def __getstate__(self) -> dict:
        return {} if self._qparams is None else {"qparams": self._qparams}

    def __setstate__(self, state: dict) -> None:
        state = dict(state or {})
        if "data" in state:       # MegEngine's files before its fastcore Tensor
            data, device, dtype = state.pop("data"), state.pop("device"), state.pop("dtype")
            self._reset(Tensor(data, dtype=dtype, device=device))
        self._qparams = state.pop("qdict", None) if "qdict" in state else \
            state.pop("qparams", None)
        if "name" in state:       # megtrace's own files before this format
            self._name = state.pop("name") or ""

    # -- in-place updates ---------------------------------------------------------------
    def _reset(self, other) -> None:
        """Make this tensor hold `other`'s value (MegEngine's _reset: x[...] = v, x += y)."""
        if not isinstance(other, Tensor):
            other = Tensor(other, dtype=self.dtype, device=self.device)
        rec = _active_recorder()
        if rec is not None and other._owner is None and hasattr(rec, "rebind"):
            rec.rebind(self, other)
        elif rec is not None and other._owner is rec and self._owner is not rec and \
                hasattr(rec, "assign"):
            rec.assign(self)      # an outside tensor updated by the trace (optimizer step)
        self._value, self._var, self._owner = other._value, other._var, other._owner
        self._device, self._ad = other._device, other._ad     # autodiff follows the value
        self._version += 1

    def _set_value(self, value: np.ndarray, dtype: np.dtype | None = None) -> None:
        """In-place update of a tensor's value (parameters, running statistics), in
        `dtype` (default: the tensor's own)."""
        self._value = _dt.as_array(value, self._value.dtype if dtype is None else dtype)
        self._version += 1

    def set_value(self, value) -> None:
        """Deprecated in MegEngine 1.0 (use `x[...] = value`); warns as MegEngine does."""
        warnings.warn("Call to deprecated method set_value. (use ``x[...] = value`` instead) "
                      "-- Deprecated since version 1.0.", DeprecationWarning, stacklevel=2)
        self._reset(value)

    def reset_zero(self) -> None:
        """Deprecated in MegEngine 1.0 (use `x *= 0`); warns as MegEngine does."""
        warnings.warn("Call to deprecated method reset_zero. (use ``*= 0`` instead) -- "
                      "Deprecated since version 1.0.", DeprecationWarning, stacklevel=2)
        self *= 0

    def __setitem__(self, index, value) -> None:
        if index is Ellipsis:
            self._reset(value)
            # MegEngine's _reset takes the value's tensor itself, format too (an array: default)
            self._format = value._format if isinstance(value, Tensor) else "default"
            return
        from .functional.indexing import setitem
        self._reset(setitem(self, index, value))

    def __getitem__(self, index) -> "Tensor":
        from .functional.indexing import getitem
        return getitem(self, index)

    # -- methods that are operators ---------------------------------------------------
    def astype(self, dtype) -> "Tensor":
        return _functional().astype(self, dtype)

    def reshape(self, *shape) -> "Tensor":
        return _functional().reshape(self, _shape_arg(shape))

    def _broadcast(self, *shape) -> "Tensor":
        return _functional().broadcast_to(self, _shape_arg(shape))

    def flatten(self, start_axis: int = 0, end_axis: int = -1) -> "Tensor":
        return _functional().flatten(self, start_axis, end_axis)


def _created_in_trace(t: Tensor) -> None:
    """Tensors made inside a traced function are constants of its graph (MegEngine: Const)."""
    rec = _active_recorder()
    if rec is not None:
        rec.created(t)


_recorders = None     # dispatch._active (the per-thread recorder stack) once imported


def _active_recorder():
    """dispatch.active_recorder() without an import statement per call (dispatch imports
    this module, so it is bound on first use)."""
    global _recorders
    if _recorders is None:
        from .dispatch import _active
        _recorders = _active
    stack = _recorders.stack
    return stack[-1] if stack else None


def constant(array: np.ndarray, device=None) -> Tensor:
    """`Tensor(array, device=device)` for an array already of a plain megtrace dtype
    (float32, int32, ...; not quantized) and C-contiguous, without Tensor()'s
    conversions: the scalar constants of functionals and gradient rules, many per
    replayed op."""
    t = Tensor._wrap(array, device=device)
    _created_in_trace(t)
    return t


def _check_format(format: str) -> str:
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {_FORMATS}; got {format!r}")
    if format != "default":
        _formats.mark_used()
    return format


def _traced_shape_value(t: Tensor, data, dtype, device) -> bool:
    """`tensor(x.shape)` in a trace (MegEngine: the shape is a Tensor there): make `t` the
    traced int32 value of the shape's expression, so that shapes built from it stay
    symbolic in dumps. False when `data` holds no traced dims."""
    from .dispatch import active_recorder
    from .symbolic import has_symbols
    rec = active_recorder()
    make = getattr(rec, "shape_tensor", None)
    if make is None or not has_symbols(data) or \
            (dtype is not None and _dt.canonical(dtype) != "int32"):
        return False
    var = make(data)
    if var is None:
        return False
    t._value, t._var, t._owner = None, var, rec
    t._device = _device.as_device(device)
    return True


def shape_of_tensor(t: Tensor) -> tuple:
    """A 1-d int Tensor given as a shape: its values, as SymInts when the trace knows it
    as shape arithmetic (so the shape stays symbolic in a dump)."""
    read = getattr(t._owner, "shape_values", None) if t._var is not None else None
    dims = read(t) if read is not None else None
    return dims if dims is not None else tuple(int(d) for d in np.atleast_1d(t.numpy()))


def _shape_arg(args: tuple) -> tuple:
    """MegEngine's shape arguments: x.reshape(2, 3), x.reshape((2, 3)), x.reshape(shape_tensor)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, np.ndarray, Tensor)):
        args = args[0]
    if isinstance(args, Tensor):
        return shape_of_tensor(args)
    return tuple(int(d) if isinstance(d, (Tensor, np.integer)) else d for d in args)


def _binary(name: str, reflected: bool = False):
    def method(self, other):
        if other is None:
            raise TypeError("the operand is None and is not supported.")
        # the module, imported once (an import statement per operator was a tenth of
        # a replayed transformer's Python, issue 11); the function still looked up
        fn = getattr(_functional(), name)
        return fn(other, self) if reflected else fn(self, other)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _inplace(dunder: str):
    def method(self, other):
        self._reset(getattr(self, dunder)(other))
        return self
    method.__name__ = dunder.replace("__", "__i", 1)
    return method


for _dunder, _fname in (("add", "add"), ("sub", "sub"), ("mul", "mul"),
                        ("truediv", "div"), ("pow", "pow"), ("floordiv", "floor_div"),
                        ("mod", "mod"), ("matmul", "matmul"), ("and", "logical_and"),
                        ("or", "logical_or"), ("xor", "logical_xor"),
                        ("lshift", "left_shift"), ("rshift", "right_shift")):
    setattr(Tensor, f"__{_dunder}__", _binary(_fname))
    setattr(Tensor, f"__r{_dunder}__", _binary(_fname, reflected=True))
    setattr(Tensor, f"__i{_dunder}__", _inplace(f"__{_dunder}__"))
for _dunder, _fname in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                        ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")):
    setattr(Tensor, f"__{_dunder}__", _binary(_fname))
Tensor.__hash__ = object.__hash__     # defining __eq__ would otherwise drop it


def _unary(name: str):
    def method(self):
        return getattr(_functional(), name)(self)
    method.__name__ = f"__{name}__"
    return method


# round(x), math.floor(x), math.ceil(x): a Tensor, as MegEngine's Elemwise ROUND/FLOOR/CEIL
for _name in ("round", "floor", "ceil"):
    setattr(Tensor, f"__{_name}__", _unary(_name))


_F = None      # megtrace.functional once imported (it imports this module)


def _functional():
    """megtrace.functional (imported on first use: it imports this module)."""
    global _F
    if _F is None:
        from . import functional
        _F = functional
    return _F


def _reduction(mode: str):
    def method(self, axis=None, keepdims: bool = False) -> "Tensor":
        return getattr(_functional(), mode)(self, axis=axis, keepdims=keepdims)
    method.__name__ = mode
    return method


for _mode in ("sum", "mean", "max", "min", "prod"):
    setattr(Tensor, _mode, _reduction(_mode))
Tensor.__neg__ = lambda self: _functional().neg(self)
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = lambda self: _functional().abs(self)
def _invert(self) -> "Tensor":
    """`~mask` (MegEngine has no bitwise NOT: `~` on numbers is a TypeError, not a mask)."""
    if self.dtype.kind != "b":
        raise TypeError(f"Elemwise.Mode.NOT requires a bool tensor; got {self.dtype.name} "
                        "(megtrace, like MegEngine, has no bitwise not)")
    return _functional().logical_not(self)


Tensor.__invert__ = _invert


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


tensor = Tensor
