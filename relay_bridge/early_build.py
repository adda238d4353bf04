"""Build the CPU rules' kernels while the graph is still being lowered (issue 11: first call).

A rule's kernel (conv, Winograd, dense, pool, ...) is a finished, scheduled PrimFunc the
moment the lowering makes it: the Relax passes after it only fuse and schedule the
other (generic) kernels and give each function its global symbol. So it can be built,
and JIT-compiled for this machine, on a worker thread while the main thread goes on
lowering the rest of the graph and running the Relax passes (Python, on one core),
instead of after them. ResNet-18 makes its 18 rule kernels over the ~0.5 s of its
lowering; the build of each is ~0.1-0.25 s of LLVM.

The worker builds the kernels offered in modules of at most two, in the order offered
(a module costs ~15 ms of LLVM set-up of its own; a larger one would still be building
long after the ordinary build's threads are done: ResNet-18's second module held ten
kernels, 2.0 s, while the other eight took 0.7 s on two threads). When `parallel_build`
reaches the TIR kernels it calls `take`: kernels not yet started go back to the
ordinary parallel build, and a module built here is linked in only when each of its
kernels is, unchanged, in the final module under the same name (structural equality,
attributes included), so a pass that rewrote a kernel after it was offered (donate.py's
in-place copies are new functions under new names) never runs stale code: that
module is dropped and its kernels are built with the rest. MEGTRACE_EARLY_BUILD=0
turns it off.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

# what this process did, for tests: kernels offered, built here and linked, dropped
stats = {"offered": 0, "linked": 0, "dropped": 0, "returned": 0}
MODULE_KERNELS = 2      # kernels per module built here, at most


def enabled() -> bool:
    return os.environ.get("MEGTRACE_EARLY_BUILD", "1").lower() not in ("0", "false", "off")


def is_rule_kernel(func: Any) -> bool:
    """A rule's scheduled PrimFunc (primfunc.mark), which the Relax passes leave as it is."""
    attrs = func.attrs
    return attrs is not None and "megtrace.rule" in attrs and "tirx.is_scheduled" in attrs


@dataclass
class _Batch:
    functions: dict[str, Any]                   # name -> PrimFunc with its global symbol
    future: Future = field(default_factory=Future)


class EarlyBuilds:
    """Kernels offered during the lowering, built as modules on one worker thread.

    `build(functions)` makes the runtime module of {name: PrimFunc} (parallel_build's
    build_module, in its target and pass context)."""

    def __init__(self, build: Callable[[dict[str, Any]], Any]):
        self._build = build
        self._lock = threading.Lock()
        self._queue: dict[str, Any] = {}
        self._offered: set[str] = set()
        self._batches: list[_Batch] = []
        self._busy = False
        self._closed = False
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="megtrace-early-build")

    def offer(self, name: str, func: Any) -> None:
        """A rule kernel the lowering just added to the module as `name`."""
        if not is_rule_kernel(func):
            return
        with self._lock:
            if self._closed or name in self._offered:
                return
            self._offered.add(name)
            self._queue[name] = func.with_attr("global_symbol", name)
            stats["offered"] += 1
            if not self._busy:
                self._busy = True
                self._pool.submit(self._work)

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue or self._closed:
                    self._busy = False
                    return
                names = list(self._queue)[:MODULE_KERNELS]
                batch = _Batch({name: self._queue.pop(name) for name in names})
                self._batches.append(batch)
            try:
                batch.future.set_result(self._build(batch.functions))
            except BaseException as e:   # the kernels are built again with the rest
                batch.future.set_exception(e)

    def take(self, functions: dict[str, Any]) -> list[tuple[Future, list[str]]]:
        """Stop building; for the final module's TIR `functions` {name: PrimFunc}, the
        modules to link: (future of the module, names of its kernels). Modules still
        being built are not waited for here (the caller builds the rest meanwhile)."""
        with self._lock:
            self._closed = True
            stats["returned"] += len(self._queue)
            self._queue.clear()
            batches = list(self._batches)
        keep = []
        for batch in batches:
            if all(name in functions and _same(functions[name], func)
                   for name, func in batch.functions.items()):
                keep.append((batch.future, list(batch.functions)))
            else:
                stats["dropped"] += len(batch.functions)
        return keep

    def close(self) -> None:
        """Stop building and wait for the worker (after `take`, or when the build failed)."""
        with self._lock:
            self._closed = True
            self._queue.clear()
        self._pool.shutdown(wait=True)


def _same(a: Any, b: Any) -> bool:
    import tvm_ffi
    return bool(tvm_ffi.structural_equal(a, b))

