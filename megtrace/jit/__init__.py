"""`megtrace.jit`: MegEngine's `trace`, run by TVM."""
from ..errors import TraceError
from .configs import DTRConfig, GraphOptimizationConfig, SublinearMemoryConfig
from .tracing import trace

__all__ = ["DTRConfig", "GraphOptimizationConfig", "SublinearMemoryConfig", "TraceError",
           "trace"]
