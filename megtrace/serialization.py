"""`megtrace.save` / `megtrace.load`: checkpoints (state dicts, tensors) with pickle, as
`megengine.save` / `megengine.load` do. Files saved by MegEngine load here: its
`megengine.tensor.Tensor`/`Parameter` objects become megtrace tensors. Model files for
deployment are `trace.dump`'s business."""
from __future__ import annotations

import os
import pickle
from typing import Any

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


def save(obj: Any, f, pickle_protocol: int = pickle.DEFAULT_PROTOCOL) -> None:
    if hasattr(f, "write"):
        pickle.dump(obj, f, protocol=pickle_protocol)
        return
    with open(os.fspath(f), "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle_protocol)


def load(f, map_location=None, pickle_module=None) -> Any:
    """Unpickle a checkpoint (ours or MegEngine's). Pickle runs code: load only files you
    trust."""
    if hasattr(f, "read"):
        return _Unpickler(f).load()
    with open(os.fspath(f), "rb") as fh:
        return _Unpickler(fh).load()
