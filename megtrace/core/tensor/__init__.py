"""`megtrace.core.tensor`: the part of MegEngine's `megengine.core.tensor` that user code
imports (quantized dtypes)."""
from . import dtype  # noqa: F401
