"""Unpickling that cannot run code: only an allow-list of plain data types is rebuilt.

A pickle is a program: `pickle.load` on a file from the internet can call `os.system`.
Checkpoints (state dicts of NumPy arrays and tensors) and a model's `user_info` need only
containers, numbers, strings and arrays, so those are all this unpickler constructs
(torch.load's `weights_only` default since 2.6 draws the same line). A leaf module: it
imports nothing from megtrace, so the file-format readers can use it too.
"""
from __future__ import annotations

import io
import pickle
import sys
from typing import Any, BinaryIO, Callable, Mapping

# (module, name) pairs a checkpoint may reference; everything else is refused.
ALLOWED: frozenset[tuple[str, str]] = frozenset({
    *(("builtins", n) for n in ("dict", "list", "tuple", "set", "frozenset", "int", "float",
                                "complex", "str", "bytes", "bytearray", "bool", "slice",
                                "object")),
    ("collections", "OrderedDict"),
    ("copyreg", "_reconstructor"),       # constructs only classes that are themselves allowed
    ("copyreg", "__newobj__"),           # cls.__new__(cls) of an allowed class
    ("_codecs", "encode"),               # NumPy's protocol-2 array bytes
    *((m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray")
      for n in ("_reconstruct", "scalar")),
    *((m, "_frombuffer") for m in ("numpy.core.numeric", "numpy._core.numeric")),
    ("numpy", "ndarray"), ("numpy", "dtype"),
})


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle references something outside the allow-list."""


class SafeUnpickler(pickle.Unpickler):
    """`pickle.Unpickler` that resolves only ALLOWED names, NumPy's dtype classes, the
    `extra` stand-ins it is given ((module, name) -> object), and classes of modules the
    program has ALREADY imported that `allow_class` accepts (e.g. Module subclasses: a
    pickled model rebuilds the user's own classes, but a file never imports anything)."""

    def __init__(self, file: BinaryIO, *, extra: Mapping[tuple[str, str], Any] | None = None,
                 allow_class: Callable[[type], bool] | None = None, what: str = "load"):
        super().__init__(file)
        self._extra = dict(extra or {})
        self._allow_class = allow_class
        self._what = what

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._extra:
            return self._extra[(module, name)]
        if (module, name) in ALLOWED or (module == "numpy.dtypes" and name.endswith("DType")):
            return super().find_class(module, name)
        loaded = sys.modules.get(module)
        if self._allow_class is not None and loaded is not None and "." not in name:
            value = getattr(loaded, name, None)
            if isinstance(value, type) and self._allow_class(value):
                return value
        raise UnsafePickleError(
            f"{self._what}: the pickle wants {module}.{name}, which is not a type a checkpoint "
            "holds (plain containers, numbers, strings, NumPy arrays, tensors); unpickling it "
            "could run code. If you trust the file, pass weights_only=False.")


def loads(data: bytes, *, what: str = "load") -> Any:
    """Unpickle bytes with the allow-list."""
    return SafeUnpickler(io.BytesIO(data), what=what).load()
