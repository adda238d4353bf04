"""The likely fix for a replay's TraceError, in words a user can act on.

Built only when a replay raises. The commonest causes of a mismatch are Python
decisions that tracing froze: a branch on a tensor's value (`if x.sum() > 0`), or a
number taken out of a tensor (`int(t)`, `t.item()`) and used as a constant. While
recording, the recorder notes where Python read tensor values (file:line, before which
traced op), so the hint can name the line that most likely froze the decision.
"""
from __future__ import annotations

from .entry import TraceEntry

_READS = "bool(), int(), float(), .item() or .numpy()"


def _reads_before(entry: TraceEntry, index: int) -> list[str]:
    seen: list[str] = []
    for pc, where in entry.value_reads:
        if pc <= index and where not in seen:
            seen.append(where)
    return seen[-3:]


def branch_hint(entry: TraceEntry, index: int) -> str:
    """For "operator mismatch": the function ran different ops than when traced."""
    reads = _reads_before(entry, index)
    if reads:
        return (f"likely cause: Python read a tensor's value while tracing ({_READS} at "
                f"{', '.join(reads)}) and took a branch on it (e.g. a Python `if` on a "
                "tensor); the trace keeps only the branch taken then. Fix: compute with "
                "tensor ops (F.where(cond, a, b)) or trace each branch as its own function")
    return ("likely cause: the function's Python control flow depends on something other "
            "than its tensor arguments (a Python argument, a global, a module attribute) "
            "that changed since tracing. Fix: trace one function per case")


def constant_hint(entry: TraceEntry, index: int, kind: str) -> str:
    """For "tensors not equals": a value the trace froze as a constant changed."""
    if kind == "captured":
        return ("likely cause: a tensor from outside the function, captured as a constant "
                "(capture_as_const=True), was changed after tracing. Fix: pass it as an "
                "argument")
    reads = _reads_before(entry, index)
    if reads:
        return (f"likely cause: int(tensor) / float(tensor) / .item() used as a constant: "
                f"Python read a tensor's value while tracing ({', '.join(reads)}) and the "
                "number became a constant of the graph. Fix: keep it a tensor (x * t, not "
                "x * int(t))")
    return ("likely cause: a tensor created inside the function from Python data that "
            "changed (a global, an attribute, a Python argument). Fix: pass it as a "
            "tensor argument")
