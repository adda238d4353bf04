"""Loaders run when a pickled TracedModule is loaded (MegEngine's
traced_module.serialization): they may rewrite the exprs calling a function, a Tensor
method or a module type (say, to keep an old file working after an API change). New exprs
a loader builds (CallMethod(node, "astype"), set_args_kwargs, return_val) are put into the
graph before their readers, with names and ids, once every loader has run.

Functions and module types are named by (module path, qualified name); MegEngine's paths
("megengine.functional.nn", "megengine.module.conv") name megtrace's same objects."""
from __future__ import annotations

from typing import Callable

from .expr import Apply, CallFunction, CallMethod, Input
from .node import ModuleNode

__all__ = ["FUNCTIONAL_LOADER", "MODULE_LOADER", "OPDEF_LOADER", "TENSORMETHOD_LOADER",
           "register_functional_loader", "register_module_loader", "register_opdef_loader",
           "register_tensor_method_loader"]

OPDEF_LOADER: dict = {}
FUNCTIONAL_LOADER: dict = {}
TENSORMETHOD_LOADER: dict = {}
MODULE_LOADER: dict = {}


def _key(name):
    """(module path, qualname) with MegEngine's package name read as megtrace's."""
    if isinstance(name, tuple) and len(name) == 2 and isinstance(name[0], str):
        mod = name[0]
        if mod == "megengine" or mod.startswith("megengine."):
            mod = "megtrace" + mod[len("megengine"):]
        return mod, name[1]
    return name


def _registrar(table_name: str, keyed: bool):
    def register(*keys):
        def callback(loader: Callable):
            table = globals()[table_name]
            for key in keys:
                key = _key(key) if keyed else key
                assert key not in table, f"{key} already has a loader"
                table[key] = loader
            return loader
        return callback
    return register


register_opdef_loader = _registrar("OPDEF_LOADER", False)
register_functional_loader = _registrar("FUNCTIONAL_LOADER", True)
register_module_loader = _registrar("MODULE_LOADER", True)
register_tensor_method_loader = _registrar("TENSORMETHOD_LOADER", False)
register_opdef_loader.__doc__ = "Decorator: `loader(expr)` runs on loaded Apply exprs of these ops."
register_functional_loader.__doc__ = ("Decorator: `loader(expr)` runs on loaded calls of these "
                                      "functions, given as (module path, qualname).")
register_module_loader.__doc__ = ("Decorator: `loader(expr)` runs on loaded calls of modules of "
                                  "these types, given as (module path, qualname).")
register_tensor_method_loader.__doc__ = ("Decorator: `loader(expr)` runs on loaded calls of "
                                         "these Tensor methods (by name).")


def _table(name: str) -> dict:
    # looked up on each load: code may replace the tables (S.FUNCTIONAL_LOADER = {...})
    return {_key(k) if name != "TENSORMETHOD_LOADER" else k: v
            for k, v in globals()[name].items()}


def run_loaders(graph) -> None:
    """Run the registered loaders on `graph`'s exprs, then make the graph whole again."""
    functional, modules = _table("FUNCTIONAL_LOADER"), _table("MODULE_LOADER")
    methods, opdefs = _table("TENSORMETHOD_LOADER"), globals()["OPDEF_LOADER"]
    if not (functional or modules or methods or opdefs):
        return
    for expr in list(graph._exprs):
        loader = None
        if isinstance(expr, CallFunction):
            loader = functional.get((expr.func.__module__, expr.func.__qualname__))
        elif isinstance(expr, CallMethod) and expr.method == "__call__" and \
                isinstance(expr.inputs[0], ModuleNode):
            tp = expr.inputs[0].module_type
            loader = modules.get((tp.__module__, tp.__qualname__))
        elif isinstance(expr, CallMethod):
            loader = methods.get(expr.method)
        elif isinstance(expr, Apply):
            loader = opdefs.get(expr.opdef)
        if loader is not None:
            loader(expr)
    _repair(graph)


def _repair(graph) -> None:
    """Exprs a loader created go before the first expr reading their results; users lists
    follow the inputs; new nodes get names and ids."""
    exprs = graph._exprs
    index = 0
    while index < len(exprs):
        inserted = False
        for node in exprs[index].inputs:
            producer = node.expr
            if producer is not None and producer not in exprs and \
                    not isinstance(producer, Input):
                exprs.insert(index, producer)
                inserted = True
        if not inserted:
            index += 1
    for expr in exprs:
        for node in set(expr.inputs):
            want, have = expr.inputs.count(node), node.users.count(expr)
            node.users.extend([expr] * max(want - have, 0))
            for _ in range(max(have - want, 0)):
                node.users.remove(expr)
        for node in expr.outputs:
            node.expr = expr
    for node in graph.nodes(False):
        node.users = [e for e in node.users if node in e.inputs]
    new = []
    for expr in exprs:
        if expr._top_graph is None or expr._top_graph() is not graph:
            graph._own(expr)
            graph._namespace.auto_name(expr)
            new.append(expr)
    graph._number_new(new)
