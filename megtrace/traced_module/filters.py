"""Lazily filtered iteration over a graph's exprs and nodes (graph.exprs().call_function(F.relu)
.as_unique()), as MegEngine's ExprFilter / NodeFilter."""
from __future__ import annotations

import fnmatch
import re
from typing import Callable, Iterable, Iterator, Sequence

from .expr import CallMethod, is_call_function
from .node import ModuleNode


class BaseFilter:
    """An iterable over a fresh iterator made by `source()`, with conversions."""

    def __init__(self, source: Callable[[], Iterator]):
        self._source = source

    def __iter__(self):
        return iter(self._source())

    def _derive(self, keep: Callable[[object], bool]):
        return type(self)(lambda: (x for x in self._source() if keep(x)))

    def as_list(self) -> list:
        return list(self)

    def as_dict(self) -> dict:
        return {x._id: x for x in self}

    def as_unique(self):
        items = self.as_list()
        if len(items) != 1:
            raise AssertionError(f"The number of matched objects should be 1, "
                                 f"but got {len(items)}")
        return items[0]

    def as_count(self) -> int:
        return sum(1 for _ in self)


class ExprFilter(BaseFilter):
    def call_function(self, func: Callable = None) -> "ExprFilter":
        return self._derive(lambda e: is_call_function(e, func))

    def call_method(self, method: str = None) -> "ExprFilter":
        """Every CallMethod named `method` (any when None): tensor methods and, as in
        MegEngine, the `__call__` of submodules."""
        return self._derive(lambda e: isinstance(e, CallMethod) and
                            (method is None or e.method == method))

    def expr_id(self, expr_id: Sequence[int]) -> "ExprFilter":
        ids = set(expr_id) if expr_id is not None else None
        return self._derive(lambda e: ids is None or e._id in ids)


class NodeFilter(BaseFilter):
    def type(self, owner_type: type) -> "NodeFilter":
        """ModuleNodes of modules of `owner_type`."""
        return self._derive(lambda n: isinstance(n, ModuleNode) and (
            owner_type is None or issubclass(n.module_type, owner_type)))

    def node_id(self, node_id: Sequence[int]) -> "NodeFilter":
        ids = set(node_id) if node_id is not None else None
        return self._derive(lambda n: ids is None or n._id in ids)

    def name(self, name: str, ignorecase: bool = True) -> "NodeFilter":
        """Nodes whose name, qualified name or full name ("<graph name>_<node name>")
        is `name` or matches it as a glob pattern (`*` and `?`, as MegEngine's)."""
        assert isinstance(name, str), "bad pattern: {!r}".format(name)
        pattern = re.compile(fnmatch.translate(name), re.IGNORECASE if ignorecase else 0)

        def full_name(n) -> str:
            graph = n.top_graph
            return f"{graph._name}_{n._name}" if graph is not None else ""

        def matches(text: str) -> bool:
            return text == name or bool(pattern.match(text))
        return self._derive(lambda n: matches(n.name or "") or matches(n.qualname or "") or
                            matches(full_name(n)))


__all__: Iterable[str] = ["BaseFilter", "ExprFilter", "NodeFilter"]
