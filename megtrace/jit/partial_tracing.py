"""`partial_trace`: MegEngine's decorator that compiles one piece of a training step, its
forward and its backward pass as two traced graphs.

The forward is a `trace` of the function. While a GradManager records, the call also
becomes one node of its tape (like `autodiff.Function`) whose backward is a second trace:
the function's own vector-Jacobian product with respect to the tensors it was given and
the outside tensors (parameters) it reads that the manager tracks. That graph recomputes
the forward (megtrace keeps no activations between the two graphs); results are the same.
"""
from __future__ import annotations

import functools
from typing import Callable

from .. import dispatch
from ..autodiff.grad import Grad
from ..autodiff.tape import recording_tapes
from ..tensor import Tensor
from .outputs import flatten_outputs, rebuild_outputs
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
        self._options = {**trace_options, "capture_as_const": False}
        self._backward: dict[tuple, trace] = {}

    def __get__(self, obj, objtype=None):        # as a method: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args):
        tapes = recording_tapes()
        if not tapes:
            return self._forward(*args)
        read: dict[int, Tensor] = {}

        def probe(op, inputs, params, outputs):
            """Instead of recording (the forward graph is one node, below): note the
            outside tensors the ops read that a tape tracks (the trace's inputs for
            arguments are its own tensors, with an owner)."""
            for t in inputs:
                if t._owner is None and any(tape.var_of(t) is not None for tape in tapes):
                    read[id(t)] = t
        hook, dispatch.tape_hook = dispatch.tape_hook, probe
        try:
            result = self._forward(*args)
        finally:
            dispatch.tape_hook = hook
        tracked = [a for a in args if isinstance(a, Tensor) and
                   any(tape.var_of(a) is not None for tape in tapes)]
        tracked += [t for t in read.values() if not any(t is a for a in tracked)]
        if not tracked:
            return result
        leaves, tree = flatten_outputs(result)
        outputs = [Tensor._wrap(t._value, device=t._device) for t in leaves]
        backward = self._node_backward(args, tracked, outputs)
        for tape in tapes:
            tape.add_node(self.__name__, backward, tracked, outputs)
        return rebuild_outputs(tree, outputs)

    def _node_backward(self, args, tracked: list[Tensor], outputs: list[Tensor]):
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        wrt_args = [positions.index(i) for i, a in enumerate(args)
                    if isinstance(a, Tensor) and any(a is t for t in tracked)]
        outside = [t for t in tracked if not any(t is args[i] for i in positions)]
        key = (tuple(wrt_args), tuple(map(id, outside)), len(outputs))
        if key not in self._backward:
            self._backward[key] = trace(self._vjp_function(args, wrt_args, outside),
                                        **self._options)
        bwd = self._backward[key]
        tensors = [args[i] for i in positions]

        def backward(grads, wanted):
            dys = [g if g is not None else Tensor._wrap(0 * o._value, device=o._device)
                   for g, o in zip(grads, outputs)]
            got = bwd(*tensors, *dys)
            got = got if isinstance(got, (tuple, list)) else (got,)
            return tuple(got)
        return backward

    def _vjp_function(self, args, wrt_args: list[int], outside: list[Tensor]):
        """f(*tensor_args, *dys) -> gradients of the tracked inputs (traced once)."""
        func, template = self._func, list(args)
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

        def vjp(*flat):
            tensors, dys = flat[:len(positions)], flat[len(positions):]
            call = list(template)
            for i, t in zip(positions, tensors):
                call[i] = t
            targets = [tensors[k] for k in wrt_args] + list(outside)
            got: dict[int, Tensor] = {}
            with Grad() as grad:
                for n, t in enumerate(targets):
                    grad.wrt(t, callback=lambda g, n=n: got.__setitem__(n, g))
                leaves, _ = flatten_outputs(func(*call))
                grad(list(leaves), list(dys))
            return tuple(got[n] if n in got else t * 0 for n, t in enumerate(targets))
        return vjp
