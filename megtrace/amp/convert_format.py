"""NCHW -> NHWC format marks (MegEngine's amp.convert_tensor_format / convert_module_format).

megtrace keeps every tensor in its logical NCHW layout; the "nhwc" format is a mark that
ops pass on as MegEngine's format transformation does (`megtrace.amp._format`), so
code that checks `tensor.format` behaves the same."""
from __future__ import annotations

from copy import deepcopy

from ..module import Module
from ..tensor import Tensor


def _is_nchw_format(x: Tensor) -> bool:
    return x.ndim in (4, 5) and x.format != "nhwc"


def convert_tensor_format(x: Tensor, inplace: bool = True) -> Tensor:
    """Mark a 4-d or 5-d tensor NHWC (in place, or a new tensor with the same value);
    others are returned as they are."""
    if not _is_nchw_format(x):
        return x
    if inplace:
        x.format = "nhwc"
        return x
    return Tensor(x.numpy(), dtype=x.dtype, device=x.device, format="nhwc")


def convert_module_format(module: Module, inplace: bool = True) -> Module:
    """Mark every 4-d/5-d tensor of `module` NHWC (on a deep copy unless `inplace`)."""
    if not inplace:
        module = deepcopy(module)
    for _, t in module.named_tensors():
        convert_tensor_format(t, inplace=True)
    return module
