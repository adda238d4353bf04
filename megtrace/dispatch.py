"""The one funnel every operator call goes through: run eagerly, or record into a trace.

`apply(op, *tensors, **params)` runs `op.eager` on NumPy when no trace is active, and
hands the call to the active recorder otherwise (JAX's bind, tinygrad's _apply_uop).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from . import formats
from .ops import OpDef, get
from .ops.registry import _REGISTRY as _ops_by_name

if TYPE_CHECKING:
    from .tensor import Tensor


class Recorder(Protocol):
    # whether it names values and ops after the module that made them (`scope`)
    names_values: bool

    def record(self, op: OpDef, inputs: tuple["Tensor", ...], params: dict) -> tuple: ...

    def materialize_live(self) -> None: ...

    # the key of a random op of `kind` with `seed` drawn while recording (None: draw it
    # eagerly from the generator)
    def random_key(self, seed: int, kind: str, device: Any) -> "Tensor | None": ...


class _RecorderStack(threading.local):
    """Each thread records into its own traces: a trace running in one thread must not
    capture the eager ops of another. None on the stack: an exclude_from_trace region
    (eager)."""

    def __init__(self):
        self.stack: list[Recorder | None] = []


_active = _RecorderStack()

# megtrace.autodiff's recorder, set while a gradient tape records: called after every op
# as tape_hook(op, inputs, params, outputs)
tape_hook = None

# megtrace.utils.profiler's Profiler while it runs: told of every op applied
# (profile_hook.op(name, start, inputs, traced)) and of compiled graph runs (jit/tracing.py)
profile_hook = None

# megtrace.amp's input casts while dtype autocast is on (MegEngine's DTypePromote rules):
# called as autocast(op, inputs, params) -> the inputs and params the op runs with
autocast = None

# autodiff/recipes.py's list while it records what a gradient rule applies: every op
# applied is appended as (recorder, op, inputs as they are now, params, outputs)
apply_log = None

# megtrace.dtr's pool while eager DTR is enabled: runs eager ops itself
# (dtr.run(op, kwargs, inputs, arrays, device) -> outputs) to record how to recompute them
dtr = None


def active_recorder() -> Recorder | None:
    stack = _active.stack
    return stack[-1] if stack else None


class recording:
    """Context manager that makes `recorder` receive every op applied inside it (None:
    ops run eagerly, as outside any trace)."""

    def __init__(self, recorder: Recorder | None):
        self.recorder = recorder

    def __enter__(self):
        _active.stack.append(self.recorder)
        return self.recorder

    def __exit__(self, *exc):
        _active.stack.pop()
        return False


def trace_input(t: "Tensor") -> "Tensor":
    """Mark `t`, created inside a traced function, as an input of the traced graph that
    every call feeds anew, not a constant (MegEngine: a tensor created without is_const
    is an External var), e.g. an optimizer's learning rate, which a scheduler changes
    between calls. Outside a trace it does nothing."""
    hook = getattr(active_recorder(), "created_input", None)
    if hook is not None:
        hook(t)
    return t


def note_undumpable(reason: str) -> None:
    """Tell the active trace that its graph does something a dumped graph cannot (e.g.
    BatchNorm in training mode updating its running statistics): `dump` then refuses
    with `reason`. Outside a trace it does nothing."""
    hook = getattr(active_recorder(), "undumpable", None)
    if hook is not None and reason not in hook:
        hook.append(reason)


def apply(op: OpDef | str, *inputs: "Tensor", **params: Any):
    """Apply an operator to tensors; returns a Tensor, or a tuple for multi-output ops."""
    if isinstance(op, str):
        op = _ops_by_name.get(op) or get(op)      # get() raises for unknown names
    if autocast is not None:
        inputs, params = autocast(op, inputs, params)
    prof = profile_hook
    start = prof.now() if prof is not None else 0.0
    stack = _active.stack
    rec = stack[-1] if stack else None
    if rec is None:
        for t in inputs:        # a Network's VarNode: its nodes record the op
            if t._value is None and getattr(t._owner, "builds_nodes", False):
                rec = t._owner
                break
    if rec is not None:
        outs = rec.record(op, inputs, params)
    else:
        outs = run_eager(op, inputs, params)
    if formats.in_use:
        formats.propagate(op.name, inputs, outs)
    if tape_hook is not None:
        tape_hook(op, inputs, params, outs)
    if apply_log is not None:
        apply_log.append((rec, op, [(t, t._owner, t._var, t._value) for t in inputs],
                          params, outs))
    if prof is not None:
        prof.op(op.name, start, inputs, rec is not None)
    return outs[0] if len(outs) == 1 else outs


def run_eager(op: OpDef, inputs: tuple, params: dict) -> tuple:
    """Compute `op` on the inputs' values now (the no-recorder path of `apply`); a
    recorder that also needs the values (traced_module's) calls it too."""
    from .tensor import Tensor
    kwargs = dict(op.bind(params))
    # a tensor a finished trace left behind (param.grad after a traced step) has its
    # value with that trace: read it as numpy() would
    arrays = [t._value if t._value is not None else _traced_value(t) for t in inputs]
    op.infer_types([_type_of(a) for a in arrays], kwargs)   # same errors as traced
    device = inputs[0]._device if inputs else None     # results live where inputs do
    if any(a.dtype.metadata for a in arrays):           # MegEngine's quantized dtypes
        return tuple(Tensor._wrap(v, device=device) for v in op.run_eager(arrays, kwargs))
    if dtr is None:
        return tuple(Tensor._wrap(v, device=device) for v in op.run_eager(arrays, kwargs))
    return dtr.run(op, kwargs, inputs, arrays, device)


def _traced_value(t: "Tensor"):
    t.numpy()               # asks the tensor's trace (or raises "value unreadable")
    return t._value


def _type_of(array):
    from .ir import TensorType
    return TensorType.of(array)
