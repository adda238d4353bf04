"""MegEngine's module path `megengine.functional.utils`: topk_accuracy (accuracy.py) and
`copy`, MegEngine's deprecated alias of F.copy (no warning: MegEngine marks it tbd)."""
from ..utils.deprecation import deprecated_func
from .accuracy import topk_accuracy

copy = deprecated_func("1.3", "megtrace.functional.tensor", "copy", True)

__all__ = ["topk_accuracy", "copy"]
