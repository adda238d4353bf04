"""Gradient tapes: what reverse-mode autodiff records while a GradManager is recording.

A `Tape` is one recording session (MegEngine's `Grad`). A tensor it tracks holds, in its
`_ad` slot, a map tape -> `_Var` (an identity token for that value in that tape); every
op applied to a tracked tensor appends a `_Node` (how to turn the gradients of its
outputs into gradients of its inputs). `backward` walks the nodes in reverse order.

The tape does not compute anything itself: the nodes call the ops' VJPs, which apply
ordinary Tensor operations. So a backward pass inside `trace` is traced like the forward
one, and a backward pass inside another recording tape is recorded by it (higher order).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .. import dispatch
from ..ops import NOT_DIFFERENTIABLE, OpDef
from ..device import as_device as _as_device
from ..tensor import Tensor as _Tensor
from .context import VjpContext
from .recipes import run_backward

_recording: list["Tape"] = []      # tapes that record, oldest first


class _Var:
    """One value in one tape (a token: gradients are keyed by it)."""

    __slots__ = ()


class _Node:
    """A node with its own backward function (Function, a traced call's tape node)."""
    __slots__ = ("name", "backward", "in_vars", "in_shapes", "out_vars")
    op = None

    def __init__(self, name, backward, in_vars, in_shapes, out_vars):
        self.name, self.backward = name, backward
        self.in_vars, self.in_shapes, self.out_vars = in_vars, in_shapes, out_vars

    def in_shape(self, i: int) -> tuple:
        return self.in_shapes[i]


class _OpNode:
    """An op's node (record_op): its backward is the op's rule (`OpDef.vjp`) on the
    tensors as they were recorded (`saved`: inputs, outputs), which recipes.py may
    replay. No closure per op; input shapes are read only when a gradient reaches them
    (most are never asked for)."""
    __slots__ = ("name", "in_vars", "out_vars", "saved", "op", "params")

    def __init__(self, op, params, in_vars, out_vars):
        self.name, self.op, self.params = op.name, op, params
        self.in_vars, self.out_vars = in_vars, out_vars

    def backward(self, grads, wanted) -> tuple:
        op = self.op
        if op.vjp is None:
            raise NotImplementedError(f"{op.name}: megtrace has no gradient rule (vjp) for "
                                      "this operator yet")
        inputs, outputs = self.saved
        return tuple(op.vjp(VjpContext(wanted), inputs, outputs, grads,
                            **dict(op.bind(self.params))))

    def in_shape(self, i: int) -> tuple:
        return _shape(self.saved[0][i])


def is_differentiable_dtype(dtype) -> bool:
    """Gradients exist for floating-point values only (MegEngine: is_differentible_dtype)."""
    return getattr(dtype, "kind", None) == "f"


def _carries_gradient(dtype) -> bool:
    """Op results the tape follows: floating point, and complex64 between a float input
    and a float result (F.polar then F.real); only floats can be attached."""
    return getattr(dtype, "kind", None) in ("f", "c")


class Tape:
    """One recording of operations for reverse-mode differentiation."""

    def __init__(self, name: str = ""):
        self.name = name
        self.nodes: list[_Node] = []
        self.callbacks: dict[_Var, Callable] = {}     # attached values -> grad callback
        self.group: list[Tape] = [self]               # tapes a backward pass suppresses
        self.recording = False
        self.suppressed = 0

    # -- life cycle ---------------------------------------------------------------------
    def enter(self) -> "Tape":
        self.recording = True
        _recording.append(self)
        _set_hook()
        return self

    def exit(self) -> None:
        if self in _recording:
            _recording.remove(self)
        _set_hook()
        self.recording = False
        self.nodes, self.callbacks = [], {}

    def suppress(self) -> None:
        self.suppressed += 1
        _set_hook()

    def resume(self) -> None:
        self.suppressed -= 1
        _set_hook()

    # -- tracking -----------------------------------------------------------------------
    def var_of(self, t) -> _Var | None:
        ad = getattr(t, "_ad", None)
        return ad.get(self) if ad else None

    def _track(self, t) -> _Var:
        """A new value of this tape for `t` (and for every Tensor sharing t's value: a
        Tensor(t) copy, a trace's stand-in for an argument)."""
        var = _Var()
        if t._ad is None:
            t._ad = {}
        t._ad[self] = var
        return var

    def wrt(self, tensor, callback: Callable) -> None:
        """Deliver the gradient of `tensor` (as it is now) to `callback(grad)`."""
        var = self.var_of(tensor) or self._track(tensor)
        self.callbacks[var] = callback

    def add_node(self, name: str, backward: Callable, inputs: Sequence, outputs: Sequence):
        """Record that `outputs` came from `inputs`; `backward(out_grads, wanted)` gives
        one gradient (or None) per input (`wanted`: which inputs the tape tracks). No
        node when no input is tracked here."""
        in_vars = [self.var_of(t) for t in inputs]
        if not any(v is not None for v in in_vars):
            return
        out_vars = [self._track(t) if _carries_gradient(t.dtype) else _Var()
                    for t in outputs]
        self.nodes.append(_Node(name, backward, in_vars, [_shape(t) for t in inputs],
                                out_vars))

    # -- differentiation ------------------------------------------------------------------
    def backward(self, ys: Sequence, dys: Sequence) -> None:
        """Propagate `dys` from `ys` back to the attached values and call their callbacks.
        The recording ends with this call."""
        if len(ys) != len(dys):
            raise ValueError(f"backward: {len(ys)} tensor(s) but {len(dys)} gradient(s)")
        grads: dict[_Var, object] = {}
        for y, dy in zip(ys, dys):
            var = self.var_of(y)
            if var is not None:
                _accumulate(grads, var, dy)
        # MegEngine: a backward pass is recorded only by tapes entered before this one and
        # not grouped with it (higher-order derivatives come from outer GradManagers)
        later = _recording[_recording.index(self) + 1:] if self in _recording else []
        others = [t for t in self.group if t is not self] + \
            [t for t in later if t not in self.group]
        self.suppress()
        for t in others:
            t.suppress()
        try:
            for node in reversed(self.nodes):
                callbacks = self.callbacks      # (a callback may end the recording)
                out_vars = node.out_vars
                if len(out_vars) == 1:      # most ops: no tuple built for nothing
                    g = grads.pop(out_vars[0], None)
                    if g is None:
                        continue
                    if callbacks and out_vars[0] in callbacks:
                        callbacks.pop(out_vars[0])(g)
                    outs = (g,)
                else:
                    outs = tuple([grads.pop(v, None) for v in out_vars])
                    for var, g in zip(out_vars, outs):
                        if g is not None and var in callbacks:
                            callbacks.pop(var)(g)
                    if all(g is None for g in outs):
                        continue
                in_vars = node.in_vars
                wanted = tuple([v is not None for v in in_vars])
                in_grads = run_backward(node, outs, wanted) if node.op is not None \
                    else node.backward(outs, wanted)
                if len(in_grads) != len(in_vars):
                    raise RuntimeError(f"{node.name}: the gradient rule returned "
                                       f"{len(in_grads)} gradient(s) for "
                                       f"{len(in_vars)} input(s)")
                for i, (var, g) in enumerate(zip(in_vars, in_grads)):
                    if var is None or g is None:
                        continue
                    _check_shape(node.name, g, node.in_shape(i))
                    _accumulate(grads, var, g)
            for var, g in grads.items():
                callback = self.callbacks.pop(var, None)
                if callback is not None:
                    callback(g)
        finally:
            for t in others:
                t.resume()
            self.resume()


def record_op(op: OpDef, inputs: tuple, params: dict, outputs: tuple) -> None:
    """dispatch.apply's hook while a tape records (and is not suppressed): a node for
    each such tape that tracks an input of `op` (`add_node`'s work, without a closure
    or input shapes per op: every op of a recorded forward pass, and of a traced step's
    replay, comes here)."""
    if op.vjp is NOT_DIFFERENTIABLE:
        return
    nodes = None
    for tape in _recording:
        if tape.suppressed:
            continue
        in_vars = [None if (ad := t._ad) is None else ad.get(tape) for t in inputs]
        if in_vars.count(None) == len(in_vars):
            continue
        out_vars = [tape._track(t) if _carries_gradient(t.dtype) else _Var()
                    for t in outputs]
        node = _OpNode(op, params, in_vars, out_vars)
        tape.nodes.append(node)
        if nodes is None:
            nodes = [node]
        else:
            nodes.append(node)
    if nodes is not None:
        # the tensors as they are now (tracked): an in-place update (x += 1) later
        # rebinds the objects themselves
        saved = (tuple(map(_snapshot, inputs)), tuple(map(_snapshot, outputs)))
        for node in nodes:
            node.saved = saved


def _set_hook() -> None:
    """dispatch.apply calls record_op only while some tape records unsuppressed (not
    for every op of a backward pass)."""
    dispatch.tape_hook = record_op if any(not t.suppressed for t in _recording) else None


_new = object.__new__


def _snapshot(t):
    """A copy of `t` as it is now (Tensor._wrap's fields, set here: no call)."""
    copy = _new(_Tensor)
    value = t._value
    if value is not None and type(value) is not np.ndarray:
        value = np.asarray(value)
    copy._value, copy._var, copy._owner, copy._version = value, t._var, t._owner, 0
    copy._name, copy._qparams, copy._format, copy._ad = "", None, "default", t._ad
    copy._device = t._device if t._device is not None else _as_device(None)
    if dispatch.dtr is not None:
        dispatch.dtr.share(t, copy)      # evicted and recomputed with t (eager DTR)
    return copy


def own_gradient(t, fmt: str):
    """Gradient `t` as a tensor object of its own marked with format `fmt` (MegEngine's
    AttachGrad: each attached tensor's gradient is wrapped anew in that tensor's format).
    Two attached tensors given the same gradient (both inputs of `x + w`) must not share
    one object: `x.grad += g` later would change `w.grad` too."""
    own = _snapshot(t)
    own._format = fmt
    return own


def recording_tapes() -> list[Tape]:
    return [t for t in _recording if not t.suppressed]


def _shape(t) -> tuple:
    return tuple(t.shape)


def _check_shape(name: str, g, shape: tuple) -> None:
    got = tuple(g.shape)
    if got != shape and all(isinstance(d, int) for d in got + shape):
        raise RuntimeError(f"{name}: the gradient rule returned shape {got} for an input "
                           f"of shape {shape}")


def _accumulate(grads: dict, var: _Var, g) -> None:
    prev = grads.get(var)
    grads[var] = g if prev is None else prev + g
