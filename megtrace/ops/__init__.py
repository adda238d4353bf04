"""The operator registry; importing this package declares every operator once."""
from . import activation, conv, elemwise, image, indexing, linalg, nn, reduce, shape  # noqa: F401
from .registry import MgeChoice, MgeComposite, MgeOpr, OpDef, all_ops, get, register

__all__ = ["MgeChoice", "MgeComposite", "MgeOpr", "OpDef", "all_ops", "get", "register"]
