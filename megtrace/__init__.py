"""megtrace: MegEngine's `trace` and `dump`, rebuilt on Apache TVM.

`import megtrace as mge` gives MegEngine's tensor, functional and module API on NumPy;
`megtrace.jit.trace` compiles traced functions with TVM; `trace.dump` writes MegEngine
FBS_V2 models and `load_graph` runs them. TVM and flatbuffers load only when needed.
"""
from . import config, functional, jit, module
from .device import get_default_device, set_default_device
from .dtype import float16, float32, int8, int16, int32, uint8
from .errors import (CompileError, DTypeError, FormatError, MegtraceError, ShapeError,
                     TraceError, UnsupportedModelError, UnsupportedOpError)
from .dump import CompGraphDumpResult, Metadata, VarNode, dump_graph
from .graph_io import LoadedGraph, load_graph
from .performance import export, load_exported, tune
from .serialization import load, save
from .tensor import Parameter, Tensor, tensor

__version__ = "0.1.0"

__all__ = ["CompGraphDumpResult", "Metadata", "VarNode", "dump_graph", "CompileError", "DTypeError", "FormatError", "LoadedGraph", "MegtraceError",
           "Parameter", "ShapeError", "Tensor", "TraceError", "UnsupportedModelError",
           "UnsupportedOpError",
           "float16", "float32", "functional", "get_default_device", "set_default_device", "int8", "int16", "int32", "jit", "load",
           "load_graph", "module", "save", "tensor", "uint8", "export", "load_exported",
           "tune"]
