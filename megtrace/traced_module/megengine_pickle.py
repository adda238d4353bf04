"""Reading TracedModules that MegEngine pickled (`megengine.save(tm, "net.tm")`).

MegEngine pickles its own graph classes (TracedModule, InternalGraph, the Exprs and Nodes,
TreeDef/LeafDef) with their `__dict__` as state, builtin modules as `_ModuleState` (class
path + `__dict__`), and names functions and module types by (module path, qualname) strings.
While such a file is unpickled those classes are `_Record`s that only keep their state;
`convert` then turns the records into the plain state megtrace's own TracedModule pickles
use (traced_module/serialize.py), so the same code rebuilds the graphs. MegEngine's paths
("megengine.functional.tensor", "megengine.module.conv") name megtrace's same objects.
"""
from __future__ import annotations

import importlib
import pickle
from collections import OrderedDict, defaultdict
from typing import Any

from ..module.module import Module
from ..tensor import Tensor
from . import serialize

_PACKAGE = "megengine"


class _Record:
    """A MegEngine object as pickled: its state, nothing else."""

    def __init__(self, *args):
        self._args = args

    def __setstate__(self, state) -> None:
        self.__dict__.update(state if isinstance(state, dict) else {"_state": state})


def _record_class(module: str, name: str) -> type:
    return type(name, (_Record,), {"_megengine_path": f"{module}.{name}"})


_RECORD_NAMES = {
    "megengine.traced_module.traced_module": ("TracedModule", "InternalGraph", "NameSpace"),
    "megengine.traced_module.expr": ("Input", "Constant", "GetAttr", "CallMethod",
                                     "CallFunction", "Apply"),
    "megengine.traced_module.node": ("ModuleNode", "TensorNode", "NodeMixin"),
    "megengine.traced_module.pytree": ("TreeDef", "LeafDef", "ArgsIndex"),
    "megengine.traced_module.serialization": ("_ModuleState",),
    "megengine.core._imperative_rt.common": ("CompNode",),
}
_RECORDS = {(m, n): _record_class(m, n) for m, names in _RECORD_NAMES.items() for n in names}
_EXPR_KINDS = ("Input", "Constant", "GetAttr", "CallMethod", "CallFunction")


def _megtrace_path(module: str) -> str:
    if module == _PACKAGE or module.startswith(_PACKAGE + "."):
        return "megtrace" + module[len(_PACKAGE):]
    return module


def _unsupported(what: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(
        f"load: the MegEngine TracedModule needs {what}, which megtrace does not support "
        "(it reads TracedModules made of module calls, megengine.functional calls, Tensor "
        "methods and constants)")


def find_class(module: str, name: str) -> Any:
    """What a MegEngine name in a pickle stands for: a record of MegEngine's traced-module
    classes, or megtrace's class or function at the same path (megengine.module.*,
    megengine.functional.*)."""
    if (module, name) in _RECORDS:
        return _RECORDS[module, name]
    if module.startswith(("megengine.module", "megengine.functional")):
        value = _lookup((_megtrace_path(module), name))
        if value is not None:
            return value
    raise _unsupported(f"{module}.{name}")


def _lookup(path: tuple[str, str]):
    module, qualname = path
    try:
        obj = importlib.import_module(module)
    except ImportError:
        return None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def holds_records(obj: Any, seen: set | None = None) -> bool:
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, _Record):
        return True
    if isinstance(obj, dict):
        return any(holds_records(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(holds_records(v, seen) for v in obj)
    return False


class _Converter:
    """Records to megtrace objects; a record met twice (a shared module) converts once."""

    def __init__(self):
        self._done: dict[int, Any] = {}

    def value(self, obj: Any) -> Any:
        if isinstance(obj, _Record):
            if id(obj) not in self._done:
                self._done[id(obj)] = self._record(obj)
            return self._done[id(obj)]
        if isinstance(obj, (dict, OrderedDict, defaultdict)):
            new = obj.copy()
            for key, val in obj.items():
                new[key] = self.value(val)
            return new
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
            return tuple(self.value(v) for v in obj)
        return obj

    def _record(self, rec: _Record) -> Any:
        kind = type(rec).__name__
        if kind == "TracedModule":
            return self._traced_module(rec)
        if kind == "_ModuleState":
            return self._module(rec)
        if kind == "CompNode":
            return getattr(rec, "_state", None)
        raise _unsupported(f"a {rec._megengine_path} outside a graph")

    def _module(self, rec: _Record) -> Module:
        cls = _lookup((_megtrace_path(rec.module[0]), rec.module[1]))
        if not isinstance(cls, type) or not issubclass(cls, Module):
            raise _unsupported(f"the module class {rec.module[0]}.{rec.module[1]}")
        module = cls.__new__(cls)
        self._done[id(rec)] = module             # a module holding itself (rare) resolves
        module.__setstate__({k: self.value(v) for k, v in rec.state.items()})
        return module

    def _traced_module(self, rec: _Record):
        from .traced_module import TracedModule
        module = TracedModule.__new__(TracedModule)
        self._done[id(rec)] = module
        state = {}
        for key, val in rec.__dict__.items():
            if key in ("_args", "dump_info"):
                continue
            if key == "argdef_graph_map":
                val = [(self._treedef(k), self._graph(g)) for k, g in val.items()]
            elif key == "argdef_outdef_map":
                val = [(self._treedef(k), self._treedef(v)) for k, v in val.items()]
            elif key == "argspec":
                val = None if val is None else tuple(val)
            elif key in ("watch_points", "end_points"):
                val = []
            elif key == "watch_node_value":
                val = {}
            else:
                val = self.value(val)
            state[key] = val
        module.__setstate__(state)
        return module

    # -- graphs as serialize.graph_state ------------------------------------------------
    def _treedef(self, rec):
        if rec is None:
            return None
        if type(rec).__name__ == "LeafDef":
            kind = _leaf_kind(rec.type)
            const = rec.const_val if kind == "const" else None
            return ("leaf", kind, serialize._encode_const(self.value(const)))
        tp = rec.type
        name = serialize._CONTAINERS.get(tp) if isinstance(tp, type) else None
        if name is None:
            path = (tp.__module__, tp.__qualname__) if isinstance(tp, type) else tuple(tp)
            name = (_megtrace_path(path[0]), path[1])
        aux = tuple(rec.aux_data) if isinstance(rec.aux_data, list) else rec.aux_data
        return (name, aux, [self._treedef(c) for c in rec.children_defs])

    def _graph(self, rec: _Record) -> dict:
        return serialize.graph_state(rec, self._expr, self._node)

    @staticmethod
    def _node(rec: _Record) -> dict:
        state = {"name": rec._name, "qualname": rec._qualname, "id": rec._id}
        if type(rec).__name__ == "ModuleNode":
            tp = rec.module_type
            path = (tp.__module__, tp.__qualname__) if isinstance(tp, type) else tuple(tp)
            state["module_type"] = (_megtrace_path(path[0]), path[1])
            _lookup(state["module_type"])        # imported, so the loader finds it
        else:
            state["shape"], state["dtype"] = rec._shape, rec._dtype
        return state

    def _expr(self, rec: _Record, index) -> dict:
        kind = type(rec).__name__
        if kind not in _EXPR_KINDS:
            what = f"{kind} exprs"
            if kind == "Apply":
                opdef = rec.opdef_state.get("opdef_type")
                what = f"Apply exprs (a direct apply of MegEngine's {opdef} OpDef)"
            raise _unsupported(what)
        state = {"kind": kind, "inputs": [index(n) for n in rec.inputs],
                 "outputs": [index(n) for n in rec.outputs],
                 "const_val": [(i, serialize._encode_const(self.value(v)))
                               for i, v in getattr(rec, "const_val", None) or []],
                 "arg_def": self._treedef(getattr(rec, "arg_def", None)),
                 "out_def": self._treedef(getattr(rec, "out_def", None)),
                 "keep": rec._disable_remove, "id": rec._id}
        if kind in ("Input", "Constant", "GetAttr"):
            state["name"] = rec.name
        if kind == "Constant":
            state["value"] = self.value(rec.value)
        elif kind == "CallMethod":
            if not rec.inputs:
                raise _unsupported(f"a call of {rec.const_val[0][1]}.{rec.method}")
            state["method"] = rec.method
        elif kind == "CallFunction":
            func = rec.func
            path = (func.__module__, func.__qualname__) if callable(func) else tuple(func)
            state["func"] = (_megtrace_path(path[0]), path[1])
            if path[0].startswith(_PACKAGE + ".") and not callable(_lookup(state["func"])):
                raise _unsupported(f"the function {path[0]}.{path[1]}")
        return state


def _leaf_kind(types) -> str:
    types = types if isinstance(types, (tuple, list)) else (types,)
    names = {type(t).__name__ for t in types if isinstance(t, _Record)} | \
        {t.__name__ for t in types if isinstance(t, type) and issubclass(t, _Record)}
    if "TensorNode" in names or any(isinstance(t, type) and issubclass(t, Tensor)
                                    for t in types):
        return "tensor"
    if "ModuleNode" in names or any(isinstance(t, type) and issubclass(t, Module)
                                    for t in types):
        return "module"
    return "const"


def convert(obj: Any) -> Any:
    """`obj` (what unpickling gave) with MegEngine's records turned into megtrace objects."""
    return _Converter().value(obj)
