"""While trace_module runs, megtrace's functionals, Tensor's operator methods and
Module.__call__ are swapped for wrappers that report each call to the tracer (MegEngine's
module_tracer.Patcher); leaving restores the originals."""
from __future__ import annotations

import functools
import inspect
import sys
from typing import Callable

from ..module.module import Module
from ..tensor import Tensor

# Tensor methods recorded as CallMethod (MegEngine's BUILTIN_ARRAY_METHOD)
TENSOR_METHODS = (
    "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__neg__", "__pos__",
    "__abs__", "__invert__", "__round__", "__floor__", "__ceil__", "__add__", "__sub__",
    "__mul__", "__matmul__", "__truediv__", "__floordiv__", "__mod__", "__pow__",
    "__lshift__", "__rshift__", "__and__", "__or__", "__xor__", "__radd__", "__rsub__",
    "__rmul__", "__rmatmul__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__",
    "__rlshift__", "__rrshift__", "__rand__", "__ror__", "__rxor__", "__iadd__", "__isub__",
    "__imul__", "__imatmul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
    "__ilshift__", "__irshift__", "__iand__", "__ior__", "__ixor__", "transpose", "astype",
    "reshape", "_broadcast", "flatten", "sum", "prod", "min", "max", "mean", "__getitem__",
    "__setitem__")

_MISSING = object()

# functions registered with traced_module.wrap: (globals dict, name)
USER_FUNCTIONS: list[tuple[dict, str]] = []


def functional_modules() -> list:
    """megtrace.functional and its loaded submodules: their public functions are builtin."""
    return [m for name, m in sorted(sys.modules.items())
            if m is not None and (name == "megtrace.functional" or
                                  name.startswith("megtrace.functional.")) and
            not name.rsplit(".", 1)[-1].startswith("_")]   # private helpers: not user API


class Patcher:
    """Installs the wrappers on enter, restores every original on exit."""

    def __init__(self, tracer):
        self._tracer = tracer
        self._undo: list[tuple[object, str, object]] = []
        self._wrappers: dict[int, Callable] = {}    # id(original) -> wrapper
        self._originals: dict[int, Callable] = {}
        self._visited: set[int] = set()
        self._wrapper_ids: set[int] = set()

    def __enter__(self):
        for module in functional_modules():
            names = getattr(module, "__all__", None) or list(vars(module))
            for name in names:
                value = module.__dict__.get(name)
                if inspect.isfunction(value) and not name.startswith("_"):
                    self._set(module.__dict__, name, self.function_wrapper(value))
        for glob, name in USER_FUNCTIONS:
            self._set(glob, name, self.function_wrapper(glob[name]))
        for name in TENSOR_METHODS:
            original = getattr(Tensor, name, _MISSING)
            if original is not _MISSING and callable(original):
                self._set_attr(Tensor, name, self._method_wrapper(name, original))
        self._set_attr(Module, "__call__", self._module_call_wrapper(Module.__call__))
        self._set_attr(Module, "__getattribute__", self._module_getattribute())
        self._set_attr(Tensor, "shape", self._shape_property(Tensor.shape))
        self._set_attr(Tensor, "name", self._name_property(Tensor.name))
        self._set_attr(Tensor, "__new__", self._tensor_new_wrapper(Tensor.__new__))
        return self

    def __exit__(self, *exc):
        while self._undo:
            target, name, original = self._undo.pop()
            if isinstance(target, dict):
                target[name] = original
            elif original is _MISSING:
                delattr(target, name)
            else:
                setattr(target, name, original)
        return False

    def _set(self, namespace: dict, name: str, value) -> None:
        self._undo.append((namespace, name, namespace[name]))
        namespace[name] = value

    def _set_attr(self, cls: type, name: str, value) -> None:
        self._undo.append((cls, name, cls.__dict__.get(name, _MISSING)))
        setattr(cls, name, value)

    def auto_patch(self, namespace: dict) -> None:
        """Patch the names in a user's module globals that refer to builtin functions
        (`from megtrace.functional import relu`)."""
        if id(namespace) in self._visited:
            return
        self._visited.add(id(namespace))
        for name, value in list(namespace.items()):
            if id(value) in self._originals and value is self._originals[id(value)]:
                self._set(namespace, name, self._wrappers[id(value)])

    def function_wrapper(self, original: Callable) -> Callable:
        if id(original) in self._wrapper_ids:        # listed twice: patched already
            return original
        key = id(original)
        if key not in self._wrappers:
            tracer = self._tracer

            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                if not tracer.recording_calls():
                    return original(*args, **kwargs)
                return tracer.call_function(original, args, kwargs)

            self._wrappers[key], self._originals[key] = wrapper, original
            self._wrapper_ids.add(id(wrapper))
        return self._wrappers[key]

    def _method_wrapper(self, name: str, original: Callable) -> Callable:
        tracer = self._tracer

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            if not tracer.recording_calls():
                return original(*args, **kwargs)
            return tracer.call_method(name, original, args, kwargs)

        return wrapper

    def _module_getattribute(self) -> Callable:
        """Reading `self.sub` in a traced forward fetches it into the graph right then
        (MegEngine records GetAttr at the access, so the graph's order follows the code)."""
        tracer = self._tracer
        plain = object.__getattribute__

        wrappers, originals = self._wrappers, self._originals

        def getattribute(module, name):
            value = plain(module, name)
            if isinstance(value, (Module, Tensor)) and tracer.recording_calls() and \
                    tracer.scopes and tracer.scope.module is module:
                tracer.node_for(value)
            elif inspect.isfunction(value) and originals.get(id(value)) is value:
                return wrappers[id(value)]   # self.add = F.add: a call of F.add (MegEngine)
            return value

        return getattribute

    def _shape_property(self, original: property) -> property:
        tracer = self._tracer

        def shape(tensor):
            value = original.fget(tensor)
            if not tracer.recording_calls():
                return value
            return tracer.traced_shape(tensor, value)

        return property(shape, doc=original.__doc__)

    def _tensor_new_wrapper(self, original: Callable) -> Callable:
        """`Tensor(x)` / `Tensor([1, x, 1])` of traced tensors is recorded (a call of
        `make_tensor`), so the new tensor follows x when the graph runs (MegEngine)."""
        tracer = self._tracer

        def __new__(cls, *args, **kwargs):
            if cls is Tensor and args and tracer.recording_calls() and \
                    _holds_tensor(args[0]):
                return tracer.call_function(make_tensor, args, kwargs)
            return original(cls, *args, **kwargs)

        return __new__

    def _name_property(self, original: property) -> property:
        """`x.name = "..."` in a traced forward names x's node too (MegEngine)."""
        tracer = self._tracer

        def setter(tensor, name):
            original.fset(tensor, name)
            if name and tracer.recording_calls() and tracer.scopes:
                tracer.rename_node(tensor, name)

        return property(original.fget, setter, doc=original.__doc__)

    def _module_call_wrapper(self, original: Callable) -> Callable:
        tracer = self._tracer

        @functools.wraps(original)
        def wrapper(module, *args, **kwargs):
            if not tracer.recording_calls():
                return original(module, *args, **kwargs)
            return tracer.call_module(module, args, kwargs, original)

        return wrapper


def _holds_tensor(value) -> bool:
    if isinstance(value, Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    return False


def make_tensor(data, dtype=None, device=None, is_const: bool = False,
                no_cache: bool = False, name=None, format: str = "default") -> Tensor:
    """`Tensor(data, ...)` as a function: what a traced graph calls where the forward made
    a tensor from traced tensors."""
    return Tensor(data, dtype=dtype, device=device, is_const=is_const, no_cache=no_cache,
                  name=name, format=format)
