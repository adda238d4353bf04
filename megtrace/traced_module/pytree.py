"""Flattening nested arguments (lists, tuples, dicts, slices) into leaves and a TreeDef.

A traced graph keys its variants by the TreeDef of `((self, *args), kwargs)`: the container
structure plus the value of every non-tensor leaf (an int, a string, None), as MegEngine's
traced_module.pytree does. Tensors and Modules are the variable leaves; everything else is a
constant baked into the TreeDef.
"""
from __future__ import annotations

from collections import OrderedDict, defaultdict
from typing import Any, Callable, NamedTuple

import numpy as np

from ..device import CompNode
from ..module.module import Module
from ..tensor import Tensor
from .node import ModuleNode, Node, TensorNode


class ArgsIndex:
    """A placeholder leaf standing for the index-th flattened argument."""

    def __init__(self, index: int = 0, name: str = ""):
        self.index, self.name = index, name

    def __repr__(self) -> str:
        return self.name


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[list, Any]]
    unflatten: Callable[[list, Any], Any]


SUPPORTED_TYPE: dict[type, _NodeType] = {}
SUPPORTED_LEAF_TYPE: set[type] = {str, int, float, bool, complex, bytes, bytearray, type(None),
                                   type(Ellipsis), ArgsIndex}
SUPPORTED_LEAF_CLS: list[type] = [Tensor, Module, Node, CompNode, np.dtype, np.ndarray,
                                   np.number, np.bool_, int, float, str]
USER_REGISTERED_LEAF_TYPE: list[tuple[str, str]] = []
USER_REGISTERED_CONTAINER_TYPE: list[tuple[str, str]] = []


def register_supported_type(type, flatten_fn: Callable | None = None,
                            unflatten_fn: Callable | None = None) -> None:
    """Let `type` appear in traced arguments: as a container (with both functions:
    flatten_fn(obj) -> (values, context), unflatten_fn(values, context) -> obj) or as a
    constant leaf (without them)."""
    info = (type.__module__, type.__qualname__)
    if flatten_fn and unflatten_fn:
        USER_REGISTERED_CONTAINER_TYPE.append(info)
        SUPPORTED_TYPE[type] = _NodeType(flatten_fn, unflatten_fn)
    else:
        USER_REGISTERED_LEAF_TYPE.append(info)
        SUPPORTED_LEAF_CLS.append(type)


def _dict_flatten(ordered: bool, obj):
    items = list(obj.items()) if ordered else sorted(obj.items())
    return [v for _, v in items], tuple(k for k, _ in items)


for _t, _ordered in ((dict, False), (defaultdict, False), (OrderedDict, True)):
    SUPPORTED_TYPE[_t] = _NodeType(
        lambda obj, _o=_ordered: _dict_flatten(_o, obj),
        lambda values, keys, _t=_t: _t(zip(keys, values)) if _t is not defaultdict
        else defaultdict(None, zip(keys, values)))
SUPPORTED_TYPE[list] = _NodeType(lambda x: (list(x), None), lambda v, _: list(v))
SUPPORTED_TYPE[tuple] = _NodeType(lambda x: (list(x), None), lambda v, _: tuple(v))
SUPPORTED_TYPE[slice] = _NodeType(lambda x: ([x.start, x.stop, x.step], None),
                                  lambda v, _: slice(*v))


def is_leaf(obj) -> bool:
    tp = obj if isinstance(obj, type) else type(obj)
    return tp in SUPPORTED_LEAF_TYPE or issubclass(tp, tuple(SUPPORTED_LEAF_CLS))


def is_variable(obj) -> bool:
    """Leaves that become graph nodes rather than constants."""
    return isinstance(obj, (Tensor, Module, Node))


def _leaf_kind(obj) -> str:
    if isinstance(obj, (Tensor, TensorNode)):
        return "tensor"
    if isinstance(obj, (Module, ModuleNode)):
        return "module"
    return "const"


class TreeDef:
    """The structure of a flattened value: container type, its context, children."""

    def __init__(self, type: type, aux_data: Any, children_defs: list["TreeDef"]):
        self.type = type
        self.aux_data = aux_data
        self.children_defs = children_defs
        self.num_leaves = sum(ch.num_leaves for ch in children_defs)

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise AssertionError(f"expect {self.num_leaves} leaves, got {len(leaves)}")
        start, children = 0, []
        for ch in self.children_defs:
            children.append(ch.unflatten(leaves[start:start + ch.num_leaves]))
            start += ch.num_leaves
        return SUPPORTED_TYPE[self.type].unflatten(children, self.aux_data)

    def _key(self):
        return (self.type, self.aux_data, tuple(ch._key() for ch in self.children_defs))

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other) -> bool:
        return isinstance(other, TreeDef) and self._key() == other._key()

    def _args_kwargs_repr(self) -> str:
        if len(self.children_defs) == 2 and issubclass(self.children_defs[0].type, (list, tuple)) \
                and issubclass(self.children_defs[1].type, dict):
            args_def, kwargs_def = self.children_defs
            parts = [repr(c) for c in args_def.children_defs]
            parts += [f"{k}={v!r}" for k, v in zip(kwargs_def.aux_data or (),
                                                   kwargs_def.children_defs)]
            return ", ".join(parts)
        return repr(self)

    def __repr__(self) -> str:
        if issubclass(self.type, list):
            fmt, sep = "[{}]", "="
        elif issubclass(self.type, tuple):
            fmt, sep = "({})", "="
        elif issubclass(self.type, dict):
            fmt, sep = "{{{}}}", ":"
        else:
            fmt, sep = self.type.__name__ + "({})", "="
        if self.aux_data:
            content = ", ".join(f"{k!r}{sep}{c!r}" for k, c in zip(self.aux_data,
                                                                    self.children_defs))
        else:
            content = ", ".join(repr(c) for c in self.children_defs)
        return fmt.format(content)


class LeafDef(TreeDef):
    """One leaf: a variable of `kind` ("tensor"/"module") or a constant value."""

    def __init__(self, kind: str, const_val: Any = None):
        super().__init__(object, None, [])
        self.num_leaves = 1
        self.kind = kind
        self.const_val = const_val

    def unflatten(self, leaves):
        if len(leaves) != 1:
            raise AssertionError(f"expect 1 leaf, got {len(leaves)}")
        return leaves[0]

    def _key(self):
        val = self.const_val
        if isinstance(val, np.ndarray):
            val = (str(val.dtype), val.shape, val.tobytes())
        try:
            hash(val)
        except TypeError:
            val = repr(val)
        return ("leaf", self.kind, type(val), val)

    def __repr__(self) -> str:
        if self.kind == "const":
            return repr(self.const_val)
        return "Tensor" if self.kind == "tensor" else "Module"


def tree_flatten(values, is_leaf: Callable[[Any], bool] = is_leaf,
                 what: str = "type") -> tuple[list, TreeDef]:
    """(leaves, TreeDef) of `values`; an unsupported type is MegEngine's AssertionError."""
    if type(values) not in SUPPORTED_TYPE:
        if not is_leaf(values):
            raise AssertionError(
                f"doesn't support {values} type, MUST use \"register_supported_type\" "
                "method to register self-defined type")
        kind = _leaf_kind(values)
        const = values if kind == "const" else None
        if isinstance(const, int) and type(const) not in (int, bool):
            const = int(const)          # a traced dim is, as a constant, its value
        return [values], LeafDef(kind, const)
    leaves, children = [], []
    child_values, aux = SUPPORTED_TYPE[type(values)].flatten(values)
    for v in child_values:
        sub, sub_def = tree_flatten(v, is_leaf, what)
        leaves.extend(sub)
        children.append(sub_def)
    return leaves, TreeDef(type(values), aux, children)
