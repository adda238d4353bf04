"""`megtrace.jit`: MegEngine's `trace`, run by TVM."""
from ..errors import TraceError
from .exclude import exclude_from_trace
from .configs import DTRConfig, GraphOptimizationConfig, SublinearMemoryConfig
from .tracing import trace
from .partial_tracing import partial_trace

__all__ = ["DTRConfig", "GraphOptimizationConfig", "SublinearMemoryConfig", "TraceError",
           "exclude_from_trace", "partial_trace", "trace"]
