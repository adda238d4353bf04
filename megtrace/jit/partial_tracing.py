"""`partial_trace`: MegEngine's decorator that compiles one piece of a training step, its
forward and its backward pass as two traced graphs.

The forward is a `trace` of the function; while a GradManager records, the call is one
node of its tape whose backward is a second trace (jit/tape_node.py), as any `trace`'s.
"""
from __future__ import annotations

import functools
from typing import Callable

from .tape_node import TapeNodeCall
from .tracing import trace

JIT_BACKEND = {"default": trace}


def partial_trace(func: Callable | None = None, *, backend: str = "default",
                  without_host: bool = True, **trace_options):
    """Compile `func`'s forward and backward as separate traces (see the module doc).
    `without_host` must stay True as in MegEngine; megtrace still runs the Python
    function on each call to check it against the record (trace's default mode)."""
    assert backend in JIT_BACKEND
    assert without_host, "partial_trace only support without_host mode currently!"

    def wrapper(func):
        return _PartialTrace(func, trace_options)
    return wrapper if func is None else wrapper(func)


class _PartialTrace:
    def __init__(self, func: Callable, trace_options: dict):
        functools.update_wrapper(self, func)
        self._func = func
        self._forward = trace(func, **trace_options)
        options = {**trace_options, "capture_as_const": False}
        self._node = TapeNodeCall(func, self._forward._plain_call,
                                  lambda fn: trace(fn, **options), self.__name__)

    def __get__(self, obj, objtype=None):        # as a method: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args):
        return self._node(*args)
