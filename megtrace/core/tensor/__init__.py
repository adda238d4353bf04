"""`megtrace.core.tensor`: the part of MegEngine's `megengine.core.tensor` that user code
imports (quantized dtypes; megbrain_graph's load_graph and dump_graph)."""
from . import dtype  # noqa: F401
