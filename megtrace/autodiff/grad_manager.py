"""`GradManager`: MegEngine's user-facing reverse-mode autodiff (attach, record, backward)."""
from __future__ import annotations

import weakref
from typing import Callable, Iterable, List, Union

from ..dispatch import active_recorder
from ..tensor import Tensor
from .grad import Grad
from .tape import is_differentiable_dtype

backwarding_grad_manager = None


def get_backwarding_grad_manager():
    """The GradManager whose backward() is running (None outside one)."""
    return backwarding_grad_manager


class AttachSpec:
    __slots__ = "tensor", "callbacks"


class GradManager:
    """Computes gradients (vector-Jacobian products) of attached tensors by reverse-mode
    autodiff: attach tensors, record (`with gm:`), then `backward(y, dy)` accumulates
    d(y . dy)/dx into each attached x's `.grad`. A manager holds weak references to what it
    attached and can be reused; one recording at a time per manager."""

    def __init__(self):
        self._attach_specs: dict[int, AttachSpec] = {}
        self._recording = False
        self._grad: Grad | None = None
        self._after_backward_callback: list[Callable] = []
        self._gradients: dict[int, Tensor] = {}

    def attached_tensors(self) -> list[Tensor]:
        """The live tensors attached with `attach`, in attach order."""
        # a copy: a collected tensor's weak reference drops its spec from the dict
        specs = list(self._attach_specs.values())
        return [t for t in (spec.tensor() for spec in specs) if t is not None]

    def attach(self, tensors: Union[Tensor, Iterable[Tensor]], callbacks=None) -> "GradManager":
        """Track `tensors` (kept by weak reference) so that backward() computes their
        gradients; each callback(tensor, grad) -> grad runs before accumulation. Attaching a
        tensor again appends its callbacks."""
        if callbacks is None:
            callbacks = []
        if callable(callbacks):
            callbacks = [callbacks]
        if isinstance(tensors, Tensor):
            tensors = [tensors]
        for x in tensors:
            assert isinstance(x, Tensor), "Object to be attached should be Tensor"
            assert is_differentiable_dtype(x.dtype), (
                "Only tensors of floating point dtype can be attached to get gradients, "
                "get tensor dtype: {} and shape: {}".format(x.dtype, x.shape))
            spec = self._attach_specs.get(id(x))
            new_attach = spec is None
            if spec is None:
                spec = self._make_spec(x)
                self._attach_specs[id(x)] = spec
            spec.callbacks.extend(callbacks)
            if new_attach and self._recording:
                self._do_record(spec)
        return self

    def _make_spec(self, tensor: Tensor) -> AttachSpec:
        selfref, key = weakref.ref(self), id(tensor)

        def forget(_):
            manager = selfref()
            if manager is not None:
                manager._attach_specs.pop(key, None)

        spec = AttachSpec()
        spec.tensor = weakref.ref(tensor, forget)
        spec.callbacks = []
        return spec

    def _register_after_backward_callback(self, callback: Callable) -> "GradManager":
        self._after_backward_callback.append(callback)
        return self

    def backward(self, y: Union[Tensor, List[Tensor]] = None,
                 dy: Union[Tensor, List[Tensor]] = None) -> None:
        """Accumulate the gradients of `y` (weighted by `dy`, ones by default) into the
        attached tensors' `.grad`, and end the recording."""
        from ..functional import ones_like
        global backwarding_grad_manager
        if not self._recording:
            raise RuntimeError("no computation history. "
                               "did you forget record() or "
                               "call a method that clears the history?")
        assert self._grad is not None
        ys = [] if y is None else list(y) if isinstance(y, (tuple, list)) else [y]
        if dy is None:
            dys = [ones_like(t) for t in ys]
        else:
            dys = list(dy) if isinstance(dy, (tuple, list)) else [dy]
        previous, backwarding_grad_manager = backwarding_grad_manager, self
        try:
            for t in ys:     # MegEngine's py_apply refuses numbers (the recording ends)
                if not isinstance(t, Tensor):
                    raise TypeError(f"py_apply expects tensor as inputs: backward got y of "
                                    f"type {type(t).__name__}")
            self._grad(ys, dys)
            for callback in self._after_backward_callback:
                callback()
            for key, grad in self._gradients.items():
                spec = self._attach_specs.get(key)
                tensor = spec and spec.tensor()
                if tensor is not None:
                    if tensor.grad is None:
                        tensor.grad = grad
                        _escapes_trace(grad)
                    else:
                        tensor.grad += grad
        finally:
            self.release()
            backwarding_grad_manager = previous

    def record(self) -> None:
        """Start recording operations (then backward() can be called)."""
        if self._recording:
            raise RuntimeError("already recording")
        grad = Grad()
        self._recording, self._grad = True, grad
        grad.__enter__()
        for spec in list(self._attach_specs.values()):   # (see attached_tensors)
            self._do_record(spec)

    def _do_record(self, spec: AttachSpec) -> None:
        tensor = spec.tensor()
        if tensor is None:
            return

        def callback(grad, callbacks=spec.callbacks):
            for cb in callbacks:
                grad = cb(tensor, grad)
            self._gradients[id(tensor)] = grad
        self._grad.wrt(tensor, callback=callback)

    def release(self) -> None:
        """Stop recording and drop what was kept for backward()."""
        if self._grad is not None:
            self._grad.__exit__(None, None, None)
            self._grad = None
        self._recording = False
        self._gradients = {}

    def __enter__(self) -> "GradManager":
        self.record()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        self.release()

    def __or__(self, other):
        if isinstance(other, GradManager):
            return GradManagerGroup([self, other])
        return NotImplemented

    __ror__ = __or__


def _escapes_trace(grad: Tensor) -> None:
    """A gradient computed inside `trace` and left in `.grad` outlives the traced
    function: the trace gives it its value when the function returns (like an outside
    tensor updated in place), so an optimizer step after the call can read it; one the
    function drops again (opt.clear_grad() inside it) is not kept."""
    rec = active_recorder()
    if rec is not None and grad._owner is rec and hasattr(rec, "escape"):
        rec.escape(grad)


class GradManagerGroup:
    """Several GradManagers recording together (`with gm1 | gm2:`): the backward pass of one
    is not recorded by the others."""

    def __init__(self, gms) -> None:
        self._gms = list(gms)

    def merge_with(self, other):
        if isinstance(other, GradManager):
            other = GradManagerGroup([other])
        elif not isinstance(other, GradManagerGroup):
            return NotImplemented
        return GradManagerGroup([*self._gms, *other._gms])

    __or__ = merge_with
    __ror__ = merge_with

    def __enter__(self):
        Grad.stack.append([])
        Grad.begin_group()
        try:
            for gm in self._gms:
                gm.record()
        finally:
            Grad.end_group()

    def __exit__(self, exc_type, exc_val, exc_tb):
        for gm in reversed(self._gms):
            gm.release()
