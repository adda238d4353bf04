"""`megtrace.save` / `megtrace.load`: checkpoints (state dicts, tensors) with pickle, as
`megengine.save` / `megengine.load` do. Files saved by MegEngine load here: its
`megengine.tensor.Tensor`/`Parameter` objects become megtrace tensors. Model files for
deployment are `trace.dump`'s business."""
from __future__ import annotations

import copyreg
import os
import pickle
from typing import Any

import numpy as np

from .safe_pickle import SafeUnpickler
from .tensor import Parameter, Tensor



def _tensor_class(cls, map_location):
    """What MegEngine's pickles construct: NEWOBJ(value, dtype, device) then the state
    (qparams; "data"/"dtype"/"device" in files from before MegEngine's fastcore Tensor).
    The device goes through `map_location`."""
    if map_location is None:
        return cls

    class _StandIn:
        def __new__(klass, data=None, dtype=None, device=None, *args, **kwargs):
            if data is None:
                return cls.__new__(cls)
            return cls.__new__(cls, data, dtype, _mapped(map_location, device))
    return _StandIn


def _mapped(map_location, device):
    if callable(map_location):
        return map_location(device)
    if isinstance(map_location, dict):
        name = str(device).split(":")[0]
        return map_location.get(str(device), map_location.get(name, device))
    return map_location


def _quantization(name: str):
    from .quantization import utils
    return getattr(utils, name)


_TENSOR_CLASSES = {("megengine.tensor", "Tensor"): Tensor,
                   ("megengine.tensor", "Parameter"): Parameter,
                   ("megengine.core.tensor.array_method", "Tensor"): Tensor}
_QUANTIZATION_CLASSES = {("megengine.quantization.utils", "QParams"): "QParams",
                         ("megengine.quantization.utils", "QuantMode"): "QuantMode"}


class _Unpickler(pickle.Unpickler):
    """Full pickle (weights_only=False): any class, with MegEngine's tensors mapped."""

    def __init__(self, f, map_location=None):
        super().__init__(f)
        self._map_location = map_location

    def find_class(self, module: str, name: str):
        if (module, name) in _TENSOR_CLASSES:
            return _tensor_class(_TENSOR_CLASSES[module, name], self._map_location)
        if (module, name) in _QUANTIZATION_CLASSES:
            return _quantization(name)
        if module.startswith(("megengine.traced_module.", "megengine.core._imperative_rt",
                              "megengine.module.", "megengine.functional.")):
            from .traced_module import megengine_pickle   # a TracedModule MegEngine pickled
            self.megengine_records = True
            return megengine_pickle.find_class(module, name)
        if module.startswith("megengine"):
            raise pickle.UnpicklingError(f"load: the checkpoint needs MegEngine's {module}.{name}, "
                                         "which megtrace does not provide")
        return super().find_class(module, name)


def _is_model_class(cls: type) -> bool:
    """Classes of the running program a safe load may rebuild: Modules and Tensors, whose
    state is data (the file can name them, never import them), and the quantized dtype
    description a QAT module's observers hold."""
    from .core.tensor.dtype import QuantDtypeMeta
    from .module.module import Module
    return issubclass(cls, (Module, Tensor)) or cls is QuantDtypeMeta


def _reconstruct(cls, base, state):
    """copyreg._reconstructor for the classes a safe load rebuilds (QParams, Modules)."""
    from .quantization.utils import QParams
    if not (cls is QParams or _is_model_class(cls)) or base is not object:
        from .safe_pickle import UnsafePickleError
        raise UnsafePickleError(f"load: the pickle reconstructs {cls!r}, which is not a type "
                                "a checkpoint holds; if you trust the file, pass "
                                "weights_only=False")
    return object.__new__(cls)


_NUMPY_SCALAR_TYPES = ("bool_", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                       "uint64", "float16", "float32", "float64")


def _unpickler(fh, weights_only: bool, map_location=None) -> pickle.Unpickler:
    if weights_only:
        extra = {key: _tensor_class(cls, map_location) for key, cls in _TENSOR_CLASSES.items()}
        extra.update({key: _quantization(name) for key, name in _QUANTIZATION_CLASSES.items()})
        extra[("copyreg", "_reconstructor")] = _reconstruct
        # MegEngine pickles a tensor's dtype as a NumPy scalar type (numpy.int8)
        extra.update({("numpy", name): getattr(np, name) for name in _NUMPY_SCALAR_TYPES})
        return SafeUnpickler(fh, extra=extra, allow_class=_is_model_class)
    return _Unpickler(fh, map_location)


def _megengine_name(module: str, name: str) -> type:
    """A class standing for MegEngine's in a pickle: its module/name are what MegEngine's
    own pickles reference, so MegEngine rebuilds its objects from ours."""
    return type(name, (), {"__module__": module, "__qualname__": name})


_STAND_INS = {("megengine.tensor", "Tensor"): _megengine_name("megengine.tensor", "Tensor"),
              ("megengine.tensor", "Parameter"): _megengine_name("megengine.tensor", "Parameter"),
              ("megengine.quantization.utils", "QParams"):
                  _megengine_name("megengine.quantization.utils", "QParams"),
              ("megengine.quantization.utils", "QuantMode"):
                  _megengine_name("megengine.quantization.utils", "QuantMode"),
              # NumPy 1.x's name for the function that rebuilds a NumPy scalar
              ("numpy.core.multiarray", "scalar"):
                  _megengine_name("numpy.core.multiarray", "scalar")}


def _pickled_dtype(dtype: np.dtype, plain):
    """A quantized dtype keeps its scale (`metadata["mgb_dtype"]`) only as the dtype object
    itself, which pickles as numpy.dtype(...) plus its state, as NumPy 1.x writes it; plain
    dtypes keep their short form `plain`."""
    return dtype if dtype.metadata else plain


class _Pickler(pickle.Pickler):
    """Arrays are pickled as numpy.ndarray(shape, dtype, bytes) and NumPy scalars as
    numpy.core.multiarray.scalar(dtype, bytes): NumPy 2 would write `numpy._core`
    references, which the NumPy 1.x that MegEngine runs with cannot load.
    Tensors are pickled as megengine.tensor.Tensor(value, dtype, device) with MegEngine's
    state ({"qparams": ...} when set), QParams as MegEngine's class; both MegEngine and
    megtrace.load rebuild them."""

    def reducer_override(self, obj):
        from .quantization.utils import QParams, QuantMode
        if type(obj) is np.ndarray and obj.dtype.kind in "biufcSU":
            return np.ndarray, (obj.shape, _pickled_dtype(obj.dtype, obj.dtype.str),
                                np.ascontiguousarray(obj).tobytes())
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufcSU":
            # a NumPy scalar (a checkpoint's best accuracy, an epoch count) as NumPy 1.x
            # pickles it: NumPy 2 would name numpy._core
            return (_STAND_INS["numpy.core.multiarray", "scalar"],
                    (obj.dtype, obj.tobytes()))
        if isinstance(obj, Tensor):
            kind = "Parameter" if isinstance(obj, Parameter) else "Tensor"
            value, dtype, device = obj.__getnewargs__()
            return (_STAND_INS["megengine.tensor", kind],
                    (value, _pickled_dtype(dtype, dtype.name), device),
                    obj.__getstate__())
        if type(obj) is QParams:      # object.__new__(QParams), then its slots
            return (copyreg._reconstructor,
                    (_STAND_INS["megengine.quantization.utils", "QParams"], object, None),
                    obj.__getstate__())
        if type(obj) is QuantMode:
            return _STAND_INS["megengine.quantization.utils", "QuantMode"], (obj.value,)
        return NotImplemented

    def dump(self, obj):
        """While pickling, MegEngine's modules resolve to the stand-ins (pickle checks
        that every class it names can be imported)."""
        import sys
        import types
        names = ["megengine", "megengine.quantization"] + sorted({m for m, _ in _STAND_INS})
        saved = {k: sys.modules.get(k) for k in names}
        for module in names:
            sys.modules[module] = types.ModuleType(module)
        for (module, name), cls in _STAND_INS.items():
            setattr(sys.modules[module], name, cls)
        try:
            return super().dump(obj)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v


def save(obj: Any, f, pickle_module=pickle, pickle_protocol: int = pickle.DEFAULT_PROTOCOL
         ) -> None:
    """Pickle a checkpoint; state dicts (name -> array) load in MegEngine too. Another
    `pickle_module` than the standard one (MegEngine's parameter) writes with its `dump`."""
    def write(fh) -> None:
        if pickle_module is pickle:
            _Pickler(fh, protocol=pickle_protocol).dump(obj)
        else:
            pickle_module.dump(obj, fh, protocol=pickle_protocol)
    if hasattr(f, "write"):
        write(f)
        return
    with open(os.fspath(f), "wb") as fh:
        write(fh)


def load(f, map_location=None, pickle_module=None, *, weights_only: bool = True) -> Any:
    """Unpickle a checkpoint (ours or MegEngine's): state dicts, tensors, arrays, plain
    containers, and whole Modules whose classes the program has already imported. By
    default nothing else is constructed, so a hostile file cannot run code
    (megtrace.safe_pickle); `weights_only=False` unpickles anything — only for files you
    trust."""
    if hasattr(f, "read"):
        return _writable(_load_from(f, weights_only, map_location))
    with open(os.fspath(f), "rb") as fh:
        return _writable(_load_from(fh, weights_only, map_location))


def _load_from(fh, weights_only: bool, map_location) -> Any:
    start = fh.tell() if hasattr(fh, "seekable") and fh.seekable() else None
    try:
        unpickler = _unpickler(fh, weights_only, map_location)
        obj = unpickler.load()
        if getattr(unpickler, "megengine_records", False):
            from .traced_module import megengine_pickle
            obj = megengine_pickle.convert(obj)
        return obj
    except pickle.UnpicklingError as e:
        if start is not None and _is_graph_file(fh, start):
            raise pickle.UnpicklingError(
                "this is a MegEngine graph file (.mge), not a pickled checkpoint; use "
                "megtrace.load_graph") from e
        raise


def _is_graph_file(fh, start: int) -> bool:
    """A .mge (FBS_V2, FBS or a testcase container) by its first bytes."""
    # only on the error path: the reader loads flatbuffers, which `import megtrace` avoids
    from megtrace.fbs.reader import detect_format
    fh.seek(start)
    return detect_format(fh.read(16)) != "unknown"


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
