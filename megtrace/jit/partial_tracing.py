"""`partial_trace`: MegEngine 1.13's `megengine.jit.partial_trace`: a block of a training
step (a module's `forward`) whose forward AND backward both run compiled.

MegEngine records the block's forward and the backward ops its GradManager then applies,
and splits them into two graphs joined by the activations the backward reads. megtrace
builds the same pair from `trace` and `autodiff`: the forward is a trace of the function,
the backward a trace of "run the function under a local Grad and pull the output
gradients back to its inputs"; a `Function` joins them, so an enclosing GradManager sees
one node whose gradient is the compiled backward. The backward graph recomputes the
forward values it needs instead of receiving them from the forward graph (same results;
costs one more forward computation, inside the compiled backward).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ..autodiff.function import Function
from ..autodiff.grad import Grad
from ..tensor import Tensor
from .outputs import flatten_outputs, rebuild_outputs
from .tracing import trace

_BACKENDS = ("default", "xla")


def partial_trace(func: Callable | None = None, *, backend: str = "default",
                  without_host: bool = True, **trace_options: Any):
    """Wrap `func` (a function or a method such as `Module.forward`) so that its forward
    and, when a GradManager differentiates through it, its backward both run as compiled
    traces. Gradients reach the tensor arguments and the parameters of Module arguments
    (`self` of a method), as MegEngine's. `trace_options` are `trace`'s."""
    assert backend in _BACKENDS
    assert without_host, "partial_trace only support without_host mode currently!"
    if backend != "default":
        raise NotImplementedError("partial_trace: backend='xla' compiles with XLA in "
                                  "MegEngine; megtrace compiles with TVM only "
                                  "(backend='default')")

    def wrapper(fn: Callable) -> Callable:
        block = _PartialTrace(fn, trace_options)

        @functools.wraps(fn)
        def wrapped_func(*args, **kwargs):
            return block(args, kwargs)
        return wrapped_func

    return wrapper if func is None else wrapper(func)


class _PartialTrace:
    """The forward and backward traces of one wrapped function."""

    def __init__(self, fn: Callable, trace_options: dict):
        self.fn = fn
        # without_host is a MegEngine requirement of the mode; megtrace's traces replay
        # the Python function instead, which reads a Module argument's parameters anew
        # on every call (MegEngine marks them as graph inputs).
        options = {k: v for k, v in trace_options.items() if k != "without_host"}
        self.forward = trace(self._run_forward, **options)
        self.backward = trace(self._run_backward, **{**options, "capture_as_const": False})
        self._structure: tuple | None = None   # (args tree, kwargs tree) of this call

    # The traced bodies receive the call's tensors flat, so that the traces see them as
    # arguments; the rest of the call (modules, numbers) comes from `_structure`.
    def _run_forward(self, *tensors):
        args, kwargs = _refill(self._structure, tensors)
        return self.fn(*args, **kwargs)

    def _run_backward(self, *tensors):
        n_in = self._n_inputs
        inputs, dys, params = tensors[:n_in], tensors[n_in:], self._params
        grads: list = [None] * (n_in + len(params))
        with Grad("partial_trace") as grad:
            for i, x in enumerate((*inputs, *params)):
                grad.wrt(x, callback=functools.partial(grads.__setitem__, i))
            args, kwargs = _refill(self._structure, inputs)
            ys, _ = flatten_outputs(self.fn(*args, **kwargs))
            grad(list(ys), list(dys))
        # an input the outputs do not depend on gets a zero gradient
        return tuple(g if g is not None else x * 0 for g, x in zip(grads, (*inputs, *params)))

    def __call__(self, args: tuple, kwargs: dict):
        tensors, structure = _flatten_call(args, kwargs)
        params = _module_params(args, kwargs)
        self._structure = structure
        block = self

        class _Block(Function):
            def forward(self, *xs):
                leaves, tree = flatten_outputs(block.forward(*xs[:len(tensors)]))
                self.tree = tree
                return tuple(leaves)

            def backward(self, *dys):
                block._n_inputs, block._params = len(tensors), params
                dys = [dy if dy is not None else y * 0 for dy, y in zip(dys, self.outputs)]
                return tuple(block.backward(*tensors, *dys))

        node = _Block()
        outputs = node(*tensors, *params)
        node.outputs = outputs
        return rebuild_outputs(node.tree, list(outputs))


def _flatten_call(args: tuple, kwargs: dict) -> tuple[list[Tensor], tuple]:
    """The Tensors of a call (in lists, tuples and dicts too) and the call with a numbered
    hole for each."""
    tensors: list[Tensor] = []

    def hollow(item):
        if isinstance(item, Tensor):
            tensors.append(item)
            return _Hole(len(tensors) - 1)
        if isinstance(item, (list, tuple)):
            return type(item)(hollow(i) for i in item)
        if isinstance(item, dict):
            return {k: hollow(v) for k, v in item.items()}
        return item
    return tensors, (hollow(args), hollow(kwargs))


def _refill(structure: tuple, tensors) -> tuple[tuple, dict]:
    def fill(item):
        if isinstance(item, _Hole):
            return tensors[item.index]
        if isinstance(item, (list, tuple)):
            return type(item)(fill(i) for i in item)
        if isinstance(item, dict):
            return {k: fill(v) for k, v in item.items()}
        return item
    args, kwargs = structure
    return fill(args), fill(kwargs)


class _Hole:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _module_params(args: tuple, kwargs: dict) -> list[Tensor]:
    """Parameters of the Module arguments (a method's `self`): MegEngine's partial_trace
    differentiates them as inputs of the block."""
    from ..module import Module     # module builds on jit's siblings; only Modules need it
    params: list[Tensor] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, Module):
            params.extend(p for p in a.parameters() if all(p is not q for q in params))
    return params
