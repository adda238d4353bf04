"""Flattening a traced function's return value (Tensor, list/tuple, dict) and back."""
from __future__ import annotations

from typing import Any

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
    if _is_namedtuple(result):
        return type(result)(*(convert(r) for r in result))
    if isinstance(result, (list, tuple)):
        return type(result)(convert(r) for r in result)
    if isinstance(result, dict):
        return {k: convert(v) for k, v in result.items()}
    return convert(result)


def flatten_outputs(result: Any) -> tuple[list[Tensor], Any]:
    """Leaves in order plus a tree describing the structure. A Tensor, None and flat
    lists/tuples/dicts of Tensors keep their simple trees (dump names a dict's outputs by
    its keys; MegEngine itself rejects dicts). Anything else (nested containers, numbers,
    arrays or strings beside the tensors: `return loss, {"acc": acc, "n": 4}`) is walked
    as MegEngine returns it: the Tensors are the leaves, the rest comes back as this call
    made it."""
    if isinstance(result, Tensor):
        return [result], "tensor"
    if result is None:
        return [], None
    if isinstance(result, (list, tuple)) and _all_tensors(result) and not _is_namedtuple(result):
        return list(result), (type(result), len(result))
    if type(result) is dict and _all_tensors(result.values()):
        return list(result.values()), (dict, tuple(result))
    leaves: list[Tensor] = []
    return leaves, ("nested", _spec(result, leaves))


def _all_tensors(items) -> bool:
    return all(isinstance(item, Tensor) for item in items)


def _is_namedtuple(value) -> bool:
    return _namedtuple_type(type(value))


def _namedtuple_type(kind: type) -> bool:
    return issubclass(kind, tuple) and hasattr(kind, "_fields")


def _spec(value: Any, leaves: list[Tensor]) -> tuple:
    if isinstance(value, Tensor):
        leaves.append(value)
        return ("leaf",)
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_spec(v, leaves) for v in value))
    if isinstance(value, dict):
        return (type(value), tuple(value), tuple(_spec(v, leaves) for v in value.values()))
    return ("value", value)


def _build(spec: tuple, leaves) -> Any:
    kind = spec[0]
    if kind == "leaf":
        return next(leaves)
    if kind == "value":
        return spec[1]
    if issubclass(kind, dict):
        return kind(zip(spec[1], (_build(s, leaves) for s in spec[2])))
    items = [_build(s, leaves) for s in spec[1]]
    return kind(*items) if _namedtuple_type(kind) else kind(items)


def rebuild_outputs(tree: Any, leaves: list[Tensor]) -> Any:
    if tree is None:
        return None
    if tree == "tensor":
        return leaves[0]
    kind, spec = tree
    if kind == "nested":
        return _build(spec, iter(leaves))
    if kind is dict:
        return dict(zip(spec, leaves))
    return kind(leaves)
