"""megtrace: MegEngine's `trace` and `dump`, rebuilt on Apache TVM.

`import megtrace as mge` gives MegEngine's tensor, functional and module API on NumPy;
`megtrace.jit.trace` compiles traced functions with TVM; `trace.dump` writes MegEngine
FBS_V2 models and `load_graph` runs them. TVM and flatbuffers load only when needed.
"""
from . import autodiff, config, distributed, dtr, functional, hub, jit, module, optimizer, random
from . import quantization  # after module: `import megtrace.module.qat` first must work too
from .device import (coalesce_free_memory, get_allocated_memory, get_cuda_compute_capability,
                     get_cuda_device_property, get_cuda_driver_version, get_cuda_version,
                     get_cudnn_version, get_default_device, get_device_count,
                     get_max_allocated_memory, get_max_reserved_memory, get_mem_status_bytes,
                     get_reserved_memory, get_tensorrt_version, is_atlas_available,
                     is_cambricon_available, is_cuda_available, is_rocm_available,
                     reset_max_memory_stats, set_default_device, set_prealloc_config)
from .dtype import float16, float32, int8, int16, int32, uint8
from .errors import (CompileError, DTypeError, FormatError, MegtraceError, ShapeError,
                     TraceError, UnsupportedModelError, UnsupportedOpError)
from .dump import CompGraphDumpResult, Metadata, VarNode, dump_graph
from .graph_io import LoadedGraph, load_graph
from .performance import export, load_exported, tune
from .serialization import load, save
from .logger import enable_debug_log, get_logger, set_log_file, set_log_level
from .tensor import Parameter, Tensor, tensor
from .version import __version__

# MegEngine imports these with the package; megtrace on first use (together ~0.3 s of
# import time that most scripts never need): `mge.amp.autocast()`, `mge.data`, `mge.cgtools`
# work alike.
_ON_FIRST_USE = {"amp": ".amp", "traced_module": ".traced_module", "data": ".data",
                 "cgtools": ".utils.comp_graph_tools"}


def __getattr__(name: str):
    if name in _ON_FIRST_USE:
        import importlib
        module = importlib.import_module(_ON_FIRST_USE[name], __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'megtrace' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The names on first use too, as `dir(megengine)` lists them."""
    return sorted(set(globals()) | set(_ON_FIRST_USE))

__all__ = ["autodiff", "config", "CompGraphDumpResult", "Metadata", "VarNode", "dump_graph", "CompileError", "DTypeError", "FormatError", "LoadedGraph", "MegtraceError",
           "Parameter", "ShapeError", "Tensor", "TraceError", "UnsupportedModelError",
           "UnsupportedOpError",
           "amp", "data", "float16", "float32", "functional", "traced_module", "get_default_device", "is_cuda_available", "set_default_device", "int8", "int16", "int32", "jit", "load",
           "load_graph", "module", "optimizer", "random", "save", "tensor", "uint8", "export", "load_exported",
           "tune",
           # megengine/__init__.py's device, logger and subpackage names
           "coalesce_free_memory", "distributed", "enable_debug_log", "get_allocated_memory",
           "get_cuda_compute_capability", "get_cuda_device_property",
           "get_cuda_driver_version", "get_cuda_version", "get_cudnn_version",
           "get_device_count", "get_logger", "get_max_allocated_memory",
           "get_max_reserved_memory", "get_mem_status_bytes", "get_reserved_memory",
           "get_tensorrt_version", "hub", "is_atlas_available", "is_cambricon_available",
           "is_cuda_available", "is_rocm_available", "reset_max_memory_stats",
           "set_log_file", "set_log_level", "set_prealloc_config"]
