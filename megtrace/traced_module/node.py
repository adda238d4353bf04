"""Nodes: the values (tensors, modules) that a traced graph's expressions consume and make."""
from __future__ import annotations

import weakref
from typing import Any, Optional


class Node:
    """A variable of an InternalGraph: made by `expr`, read by the exprs in `users`."""

    _format_spec = ""

    _next_id = 0     # MegEngine's id counter; graphs number new nodes from their _total_ids

    @classmethod
    def _get_next_id(cls) -> int:
        return cls._next_id

    @classmethod
    def _set_next_id(cls, value: int) -> None:
        cls._next_id = int(value)

    def __init__(self, expr, name: str = "", qualname: str = ""):
        self.expr = expr
        self.users: list = []
        self._id = -1
        self._name = name
        self._qualname = qualname
        self._top_graph: Optional[weakref.ReferenceType] = None

    def __repr__(self) -> str:
        return self.__format__(Node._format_spec)

    def __format__(self, format_spec: str) -> str:
        name = self._name or ""
        if format_spec in ("i", "p", "ip", "pi"):
            if "p" in format_spec and self.top_graph is not None:
                name = f"{self.top_graph._name}_{name}"
            if "i" in format_spec:
                name = f"%{self._id}_{name}"
            return name
        return name if name else f"%{self._id}"

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, new_name: str) -> None:
        """Rename the node; the name must be free in its graph."""
        graph = self.top_graph
        if graph is None:
            self._name = new_name
            return
        namespace = graph._namespace
        if namespace.used_names.get(new_name) is not None:
            raise AssertionError(
                f"The name({new_name}) is already in use. Please try a different one again.")
        namespace.unassociate_name_with_obj(self)
        self._name = namespace.create_unique_name(new_name, self)

    @property
    def qualname(self) -> str:
        """Where the value lives in the original module hierarchy ("Net.conv1.[out]")."""
        return self._qualname

    @qualname.setter
    def qualname(self, value: str) -> None:
        self._qualname = value

    @property
    def top_graph(self):
        """The graph this node belongs to."""
        return self._top_graph() if self._top_graph is not None else None


class ModuleNode(Node):
    """A Module value: the graph's `self` input, or a submodule fetched by GetAttr."""

    def __init__(self, expr, name: str = "", qualname: str = "", module_type: type = None):
        super().__init__(expr, name, qualname)
        from ..module.module import Module
        self.module_type = module_type or Module
        self._owner: Optional[weakref.ReferenceType] = None

    @property
    def owner(self):
        """The module this node stands for (when the graph is bound to its TracedModule)."""
        return self._owner() if self._owner is not None else None


class TensorNode(Node):
    """A Tensor value; shape/dtype are those seen while tracing."""

    def __init__(self, expr, name: str = "", qualname: str = "", shape=None, dtype=None,
                 qparams: Any = None):
        super().__init__(expr, name, qualname)
        self._shape = shape
        self._dtype = dtype
        self._qparams = qparams
        self._value = None

    @property
    def shape(self):
        return self._shape

    @shape.setter
    def shape(self, shape):
        self._shape = shape

    @property
    def dtype(self):
        return self._dtype

    @dtype.setter
    def dtype(self, dtype):
        self._dtype = dtype

    @property
    def qparams(self):
        return self._qparams

    @qparams.setter
    def qparams(self, qparams):
        self._qparams = qparams

    @property
    def value(self):
        """A tensor holding this node's value while graph surgery records new exprs."""
        return self._value

    @value.setter
    def value(self, value):
        self._value = value
