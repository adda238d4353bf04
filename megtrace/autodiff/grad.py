"""`Grad`: one recording for reverse-mode differentiation (MegEngine's core Grad), the
engine under GradManager and Function."""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

from .tape import Tape, own_gradient, recording_tapes

_names = itertools.count()


class Grad:
    """`with Grad() as grad: grad.wrt(x, callback=cb); y = f(x); grad(y, dy)` calls
    `cb(dy/dx)`. Grads entered together (GradManagerGroup) form a group: the backward pass
    of one does not record into the others."""

    stack: list = []
    grouping = False

    def __init__(self, name: str | None = None):
        self._name = name if name else f"grad_{next(_names)}"
        self._tape: Tape | None = Tape(self._name)

    @property
    def name(self) -> str:
        return self._name

    def wrt(self, *tensors, callback: Callable | None = None) -> "Grad":
        """Deliver each tensor's gradient to `callback`: a tensor of its own, in the
        format the tensor has now (tape.own_gradient)."""
        for x in tensors:
            self._tape.wrt(x, _delivery(callback, x._format))
        return self

    def __call__(self, ys, dys) -> None:
        if not isinstance(ys, Sequence):
            ys = [ys]
        if not isinstance(dys, Sequence):
            dys = [dys]
        self._tape.backward(list(ys), list(dys))

    def __enter__(self) -> "Grad":
        self._tape.enter()
        if Grad.grouping:
            group = Grad.stack[-1]
            group.append(self._tape)
            self._tape.group = group
        else:
            Grad.stack.append(self._tape.group)
        return self

    def __exit__(self, *exc) -> None:
        tape, self._tape = self._tape, None
        if tape is None:
            return
        tape.exit()
        if tape in tape.group:
            tape.group.remove(tape)
        if not tape.group:
            Grad.stack[:] = [g for g in Grad.stack if g is not tape.group]

    def suppress(self) -> None:
        if self._tape is not None:
            self._tape.suppress()

    def resume(self) -> None:
        if self._tape is not None:
            self._tape.resume()

    @staticmethod
    def begin_group() -> None:
        assert not Grad.grouping
        Grad.grouping = True

    @staticmethod
    def end_group() -> None:
        assert Grad.grouping and Grad.stack and Grad.stack[-1]
        Grad.grouping = False


def tracking_tapes(tensors) -> list[Tape]:
    """The recording tapes that track any of `tensors`."""
    return [t for t in recording_tapes() if any(t.var_of(x) is not None for x in tensors)]


def _delivery(callback: Callable | None, fmt: str) -> Callable:
    if callback is None:
        return lambda g: None
    return lambda g: callback(own_gradient(g, fmt))
