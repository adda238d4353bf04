"""A traced call as one node of the recording gradient tapes.

Calling a `trace` (or a `partial_trace`) while a GradManager records runs the compiled
forward and adds one node to each tape (like `autodiff.Function`): its inputs are the
tensor arguments and the outside tensors (parameters) the function reads that a tape
tracks, its backward a second trace, of the function's vector-Jacobian product with
respect to them. That graph recomputes the forward (no activations are kept between the
two graphs); results are the same as eager autodiff's.
"""
from __future__ import annotations

from typing import Callable

from .. import dispatch
from ..autodiff.grad import Grad
from ..autodiff.tape import recording_tapes
from ..tensor import Tensor
from .outputs import flatten_outputs, rebuild_outputs


class TapeNodeCall:
    """`forward(*args)` runs the compiled forward; `make_trace(fn)` traces a backward
    function with the caller's options. One per traced function: it keeps the backward
    traces, one per set of tracked inputs."""

    def __init__(self, func: Callable, forward: Callable, make_trace: Callable[[Callable], Callable],
                 name: str):
        self._func, self._forward, self._make_trace, self._name = func, forward, make_trace, name
        self._backward: dict[tuple, Callable] = {}

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
            tape.add_node(self._name, backward, tracked, outputs)
        return rebuild_outputs(tree, outputs)

    def _node_backward(self, args, tracked: list[Tensor], outputs: list[Tensor]):
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        wrt_args = [positions.index(i) for i, a in enumerate(args)
                    if isinstance(a, Tensor) and any(a is t for t in tracked)]
        outside = [t for t in tracked if not any(t is args[i] for i in positions)]
        key = (tuple(wrt_args), tuple(map(id, outside)), len(outputs))
        if key not in self._backward:
            self._backward[key] = self._make_trace(self._vjp_function(args, wrt_args, outside))
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
