"""`megtrace.save` / `megtrace.load`: checkpoints (state dicts, tensors) with pickle, as
`megengine.save` / `megengine.load` do. Files saved by MegEngine load here: its
`megengine.tensor.Tensor`/`Parameter` objects become megtrace tensors. Model files for
deployment are `trace.dump`'s business."""
from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np

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
    def find_class(self, module: str, name: str):
        if (module, name) in _MEGENGINE_CLASSES:
            return _MEGENGINE_CLASSES[(module, name)]
        if module.startswith("megengine"):
            raise pickle.UnpicklingError(f"load: the checkpoint needs MegEngine's {module}.{name}, "
                                         "which megtrace does not provide")
        return super().find_class(module, name)


class _Pickler(pickle.Pickler):
    """Arrays are pickled as numpy.ndarray(shape, dtype, bytes): NumPy 2 would write
    `numpy._core` references, which the NumPy 1.x that MegEngine runs with cannot load."""

    def reducer_override(self, obj):
        if type(obj) is np.ndarray and obj.dtype.kind in "biufc":
            return np.ndarray, (obj.shape, obj.dtype.str, np.ascontiguousarray(obj).tobytes())
        return NotImplemented


def save(obj: Any, f, pickle_protocol: int = pickle.DEFAULT_PROTOCOL) -> None:
    """Pickle a checkpoint; state dicts (name -> array) load in MegEngine too."""
    if hasattr(f, "write"):
        _Pickler(f, protocol=pickle_protocol).dump(obj)
        return
    with open(os.fspath(f), "wb") as fh:
        _Pickler(fh, protocol=pickle_protocol).dump(obj)


def load(f, map_location=None, pickle_module=None) -> Any:
    """Unpickle a checkpoint (ours or MegEngine's). Pickle runs code: load only files you
    trust."""
    if hasattr(f, "read"):
        return _writable(_Unpickler(f).load())
    with open(os.fspath(f), "rb") as fh:
        return _writable(_Unpickler(fh).load())


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
