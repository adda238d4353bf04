"""Argument normalization shared by tracing and graph editing."""
from __future__ import annotations

import inspect
from typing import Callable

from ..module import Module


def convert_kwargs_to_args(func: Callable, args: tuple, kwargs: dict,
                           bound: bool = False) -> tuple[tuple, dict]:
    """Positional parameters given by keyword (or defaulted) become positional, so one
    call has one argument structure (MegEngine's _convert_kwargs_to_args)."""
    spec = func if isinstance(func, inspect.FullArgSpec) else \
        inspect.getfullargspec(inspect.unwrap(func))
    name = getattr(func, "__qualname__", "function")
    params = spec.args[1:] if bound else spec.args
    defaults = spec.defaults or ()
    repeated = set(params[:len(args)]) & set(kwargs)
    if repeated:
        raise TypeError(f"{name} got multiple values for argument {', '.join(repeated)}")
    new_args = list(args)
    for ind in range(len(args), len(params)):
        pname = params[ind]
        if pname in kwargs:
            new_args.append(kwargs[pname])
            continue
        index = ind - len(params) + len(defaults)
        if index < 0 or index >= len(defaults):
            raise TypeError(f"{name} missing required positional arguments: {pname}")
        new_args.append(defaults[index])
    new_kwargs = {}
    kwonly_defaults = spec.kwonlydefaults or {}
    for kname in spec.kwonlyargs:
        if kname in kwargs:
            new_kwargs[kname] = kwargs[kname]
        elif kname in kwonly_defaults:
            new_kwargs[kname] = kwonly_defaults[kname]
        else:
            raise TypeError(f"{name} missing required keyword-only argument: {kname}")
    for k, v in kwargs.items():
        if k not in params and k not in spec.kwonlyargs:
            if spec.varkw is None:
                raise TypeError(f"{name} got an unexpected keyword argument {k}")
            new_kwargs[k] = v
    return tuple(new_args), new_kwargs


def get_subattr(module, target: str):
    """The attribute at dotted path `target` of `module` ("" is the module itself); every
    step but the last must be a Module (MegEngine's traced_module.utils.get_subattr)."""
    if target == "":
        return module
    *prefix, name = target.split(".")
    for item in prefix:
        module = getattr(module, item)
        if not _is_module(module):
            raise AttributeError("`{}` is not an Module".format(item))
    return getattr(module, name)


def assign_attr(obj, module, target: str) -> None:
    """Set the attribute at dotted path `target` of `module` to `obj`."""
    *prefix, name = target.split(".")
    for item in prefix:
        module = getattr(module, item)
        if not _is_module(module):
            raise AttributeError("`{}` is not an Module".format(item))
    setattr(module, name, obj)


def _is_module(obj) -> bool:
    # a Module, or the graph node standing for one (ModuleNode) while editing a graph
    return isinstance(obj, Module) or type(obj).__name__ == "ModuleNode"


def _convert_kwargs_to_args(func: Callable, args: tuple, kwargs: dict,
                            is_bounded: bool = False) -> tuple[tuple, dict]:
    """MegEngine's name and signature for `convert_kwargs_to_args`."""
    return convert_kwargs_to_args(func, args, kwargs, bound=is_bounded)


def rewrite_to_fixpoint(module: Module, step: Callable) -> None:
    """Apply `step(owner, graph, expr)` (True when it rewrote the graph) to the exprs of
    `module`'s top graph, recompiling and starting over after each rewrite, until none
    applies: the driver of the traced_module optimization passes."""
    graph = module.graph
    owner = graph._inputs[0].owner
    changed = True
    while changed:
        changed = False
        for expr in list(graph._exprs):
            if expr in graph._exprs and step(owner, graph, expr):
                graph.compile()
                changed = True
                break
