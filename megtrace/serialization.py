"""`megtrace.save` / `megtrace.load`: checkpoints (state dicts, tensors) with pickle, as
`megengine.save` / `megengine.load` do. Files saved by MegEngine load here: its
`megengine.tensor.Tensor`/`Parameter` objects become megtrace tensors. Model files for
deployment are `trace.dump`'s business."""
from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np

from .safe_pickle import SafeUnpickler
from .tensor import Parameter, Tensor



def _megengine_class(cls):
    class _Stand_in:
        """What MegEngine's pickles construct (NEWOBJ with data, dtype, device)."""

        def __new__(klass, data=None, dtype=None, device=None, *args, **kwargs):
            return cls(data, dtype=dtype)
    return _Stand_in


_MEGENGINE_CLASSES = {
    ("megengine.tensor", "Tensor"): _megengine_class(Tensor),
    ("megengine.tensor", "Parameter"): _megengine_class(Parameter),
    ("megengine.core.tensor.array_method", "Tensor"): _megengine_class(Tensor),
}


class _Unpickler(pickle.Unpickler):
    """Full pickle (weights_only=False): any class, with MegEngine's tensors mapped."""

    def find_class(self, module: str, name: str):
        if (module, name) in _MEGENGINE_CLASSES:
            return _MEGENGINE_CLASSES[(module, name)]
        if module.startswith("megengine"):
            raise pickle.UnpicklingError(f"load: the checkpoint needs MegEngine's {module}.{name}, "
                                         "which megtrace does not provide")
        return super().find_class(module, name)


def _unpickler(fh, weights_only: bool) -> pickle.Unpickler:
    if weights_only:
        return SafeUnpickler(fh, extra=_MEGENGINE_CLASSES)
    return _Unpickler(fh)


def _megengine_name(name: str) -> type:
    """A class standing for MegEngine's in a pickle: its module/name are what MegEngine's
    own pickles reference, so MegEngine rebuilds its Tensor/Parameter from ours."""
    return type(name, (), {"__module__": "megengine.tensor", "__qualname__": name})


_AS_MEGENGINE = {Tensor: _megengine_name("Tensor"), Parameter: _megengine_name("Parameter")}


class _Pickler(pickle.Pickler):
    """Arrays are pickled as numpy.ndarray(shape, dtype, bytes): NumPy 2 would write
    `numpy._core` references, which the NumPy 1.x that MegEngine runs with cannot load.
    Tensors are pickled as megengine.tensor.Tensor(value, dtype, device) with an empty
    state, which both MegEngine and megtrace.load rebuild."""

    def reducer_override(self, obj):
        if type(obj) is np.ndarray and obj.dtype.kind in "biufc":
            return np.ndarray, (obj.shape, obj.dtype.str, np.ascontiguousarray(obj).tobytes())
        if type(obj) in _AS_MEGENGINE:
            return (_AS_MEGENGINE[type(obj)], (obj.numpy(), obj.dtype.name, obj.device), {})
        return NotImplemented

    def dump(self, obj):
        """While pickling, megengine.tensor resolves to the stand-ins (pickle checks that
        every class it names can be imported)."""
        import sys
        import types
        shim = types.ModuleType("megengine.tensor")
        shim.Tensor, shim.Parameter = _AS_MEGENGINE[Tensor], _AS_MEGENGINE[Parameter]
        saved = {k: sys.modules.get(k) for k in ("megengine", "megengine.tensor")}
        sys.modules.setdefault("megengine", types.ModuleType("megengine"))
        sys.modules["megengine.tensor"] = shim
        try:
            return super().dump(obj)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v


def save(obj: Any, f, pickle_protocol: int = pickle.DEFAULT_PROTOCOL) -> None:
    """Pickle a checkpoint; state dicts (name -> array) load in MegEngine too."""
    if hasattr(f, "write"):
        _Pickler(f, protocol=pickle_protocol).dump(obj)
        return
    with open(os.fspath(f), "wb") as fh:
        _Pickler(fh, protocol=pickle_protocol).dump(obj)


def load(f, map_location=None, pickle_module=None, *, weights_only: bool = True) -> Any:
    """Unpickle a checkpoint (ours or MegEngine's): state dicts, tensors, arrays and plain
    containers. By default nothing else is constructed, so a hostile file cannot run code
    (megtrace.safe_pickle); `weights_only=False` unpickles anything — only for files you
    trust (e.g. a whole pickled Module)."""
    if hasattr(f, "read"):
        return _writable(_unpickler(f, weights_only).load())
    with open(os.fspath(f), "rb") as fh:
        return _writable(_unpickler(fh, weights_only).load())


def _writable(obj: Any) -> Any:
    """Arrays made from pickled bytes are read-only; give the caller ordinary arrays."""
    if isinstance(obj, np.ndarray) and not obj.flags.writeable:
        return obj.copy()
    if isinstance(obj, dict):
        return type(obj)((k, _writable(v)) for k, v in obj.items()) \
            if not hasattr(obj, "default_factory") else obj
    if isinstance(obj, list):
        return [_writable(v) for v in obj]
    return obj


def dumps(obj: Any, protocol: int = 4) -> bytes:
    """Pickle bytes as MegEngine (Python 3.9, protocol 4) writes them, NumPy-1 loadable."""
    import io
    buf = io.BytesIO()
    _Pickler(buf, protocol=protocol).dump(obj)
    return buf.getvalue()
