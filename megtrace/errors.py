"""megtrace's exception classes.

Each one also subclasses the builtin a user would catch (a bad shape is a ValueError, a
bad dtype a TypeError), so `except ValueError` keeps working on code written for NumPy.
"""
from __future__ import annotations


class MegtraceError(Exception):
    """Base class of every error megtrace raises on purpose."""


class ShapeError(MegtraceError, ValueError, RuntimeError):
    """Operand shapes that an operator cannot accept. Also a RuntimeError: MegEngine
    raises its shape failures (MegBrainError) as RuntimeError, and code catches that."""


class DTypeError(MegtraceError, TypeError):
    """Operand dtypes that an operator cannot accept."""


class TraceError(MegtraceError, RuntimeError):
    """Misuse of `trace` (MegEngine raises `TraceError` with the same wording).

    `str(e)` is MegEngine's exact message (its own tests compare it); megtrace's detail
    (which op, where in the user's code) is `e.detail` and a PEP 678 note, so tracebacks
    show it too.
    """

    detail: str | None = None

    @classmethod
    def because(cls, reason: str, detail: str | None = None) -> "TraceError":
        """MegEngine's "trace error because <reason>", with megtrace's detail attached."""
        return cls.with_detail(f"trace error because {reason}", detail)

    @classmethod
    def with_detail(cls, message: str, detail: str | None = None) -> "TraceError":
        e = cls(message)
        e.detail = detail
        if detail:
            e.add_note(detail)
        return e


class UnsupportedOpError(MegtraceError, NotImplementedError):
    """An operator that a backend (TVM lowering, the .mge writer or reader) cannot handle."""


class FormatError(MegtraceError, ValueError):
    """A model file that is not a valid MegEngine model (truncated, bad magic, bad offsets)."""


class CompileError(MegtraceError, RuntimeError):
    """TVM failed to build a graph; the TVM message is attached as the cause."""


class UnsupportedModelError(FormatError, UnsupportedOpError):
    """A model file that uses an operator or a parameter megtrace cannot run."""


class OptimizationSkippedWarning(UserWarning):
    """trace.dump wrote a graph unoptimized because optimize_for_inference failed on it
    (the test suite turns this into an error: every op must survive the round trip)."""
