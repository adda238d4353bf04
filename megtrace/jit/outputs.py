"""Flattening a traced function's return value (Tensor, list/tuple, dict) and back."""
from __future__ import annotations

from typing import Any

from ..errors import TraceError
from ..symbolic import SymInt, SymShape
from ..tensor import Tensor


def shape_elements_as_tensors(result: Any) -> Any:
    """Shapes and shape elements a traced function returns (`return y.shape`,
    `return y.shape[0]`) as int32 Tensors computed by the graph: in a MegEngine trace a
    shape is a Tensor, so it and its elements are written as GetVarShape (and Subtensor)
    and follow the input shapes. Call while the trace records or replays."""
    def convert(item):
        if isinstance(item, SymShape):
            return Tensor(item, dtype="int32")
        if isinstance(item, SymInt):
            return Tensor([item], dtype="int32")[0]
        return item
    if isinstance(result, SymShape):
        return convert(result)
    if isinstance(result, (list, tuple)):
        return type(result)(convert(r) for r in result)
    if isinstance(result, dict):
        return {k: convert(v) for k, v in result.items()}
    return convert(result)


def flatten_outputs(result: Any) -> tuple[list[Tensor], Any]:
    """Leaves in order plus a tree describing the structure. MegEngine rejects dicts;
    megtrace accepts them (keys in insertion order)."""
    if isinstance(result, Tensor):
        return [result], "tensor"
    if isinstance(result, (list, tuple)):
        _check(result)
        return list(result), (type(result), len(result))
    if isinstance(result, dict):
        _check(result.values())
        return list(result.values()), (dict, tuple(result))
    if result is None:
        return [], None
    raise TraceError("Only support return tensors when capture_as_const is enabled; the "
                     f"traced function returned {type(result).__name__}")


def _check(items) -> None:
    for item in items:
        if not isinstance(item, Tensor):
            raise TraceError("a traced function must return Tensors (or a list/tuple/dict of "
                             f"them); got {type(item).__name__}")


def rebuild_outputs(tree: Any, leaves: list[Tensor]) -> Any:
    if tree is None:
        return None
    if tree == "tensor":
        return leaves[0]
    kind, spec = tree
    if kind is dict:
        return dict(zip(spec, leaves))
    return kind(leaves)
