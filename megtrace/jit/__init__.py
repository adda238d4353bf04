"""`megtrace.jit`: MegEngine's `trace`, run by TVM."""
from ..errors import TraceError
from .tracing import trace

__all__ = ["TraceError", "trace"]
