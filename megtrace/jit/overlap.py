"""Running the compiled graph while Python replays (MegEngine's asynchronous dispatch).

A replayed call re-runs the user's Python to check it against the tape, but when every
input of the compiled graph is known before that Python runs (the arguments; outside
tensors frozen by capture_as_const; no random keys, no fed or external tensors), the
graph's results cannot depend on the replay. Its run then starts on a worker thread at
the start of the call (TVM releases the GIL while its kernels run) and the replay
waits for it only where a value is needed: the Python checking costs no latency on a
core the kernels do not use. A replay that fails its checks raises as before; the run's
results are then dropped, unread, and nothing was assigned.

It pays only with a core the kernels leave free: with fewer kernel threads than cores
the replay's Python then costs no latency (MobileNetV2 b1, 1 kernel thread on a 2-vCPU
AVX2 VM: a call 21.4 -> 19.3 ms, `without_host` 19.5; bench/bench_replay.py). With as
many kernel threads as cores the Python takes a core from the kernels, so it is the
default only then ("auto", also MEGTRACE_REPLAY_OVERLAP unset: TVM's thread count,
TVM_NUM_THREADS, which relay_bridge._tvm sets to all cores unless the user set it, below
the cores this process may use); MEGTRACE_REPLAY_OVERLAP=1 always, 0 never (the
sequential order: Python, then the graph). Until the run handed its inputs to TVM
before the worker started (CompiledGraph.prepare), the worker's first TVM call let the
replaying thread take the GIL for its whole replay, so the run started only after it;
that made the mode lose on loaded machines and kept it opt-in.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

ENV = "MEGTRACE_REPLAY_OVERLAP"
enabled: bool | None = None         # None: decided by wanted() from the environment


def wanted() -> bool:
    """Whether a replay should start the compiled run on a worker (see the module doc)."""
    global enabled
    if enabled is None:
        given = os.environ.get(ENV, "auto").strip().lower()
        if given in ("auto", ""):
            enabled = _kernel_threads() < _cores()
        else:
            enabled = given in ("1", "true", "on", "yes")
    return enabled


def _kernel_threads() -> int:
    """TVM's thread count: TVM_NUM_THREADS, else OMP_NUM_THREADS, else (TVM's rule
    on x86) half the hardware threads."""
    for name in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return max(1, (os.cpu_count() or 1) // 2)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:           # not Linux
        return os.cpu_count() or 1


class _Workers(threading.local):
    """One worker thread per calling thread: concurrent callers of one trace do not
    queue behind each other, and each worker keeps its own VM (CompiledGraph)."""

    def __init__(self):
        self.pool: ThreadPoolExecutor | None = None


_workers = _Workers()


def _forget_workers() -> None:
    """In a forked child: the parent's worker threads do not exist there, and a pool
    that believes its idle worker alive would queue the run forever."""
    global _workers
    _workers = _Workers()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def start(run: Callable[[], Any]) -> Future:
    """`run()` on this thread's worker; the Future gives its result or raises its
    error. Returns once the worker has started, so that the worker holds the GIL for
    the few Python lines before TVM takes over: otherwise it would wait for the GIL
    until the replaying thread yields it (up to sys.getswitchinterval(), 5 ms). `run`
    must make no other TVM call before its kernels' (each releases the GIL, and the
    replaying thread would keep it for its whole replay: CompiledGraph.prepare)."""
    pool = _workers.pool
    if pool is None:
        pool = _workers.pool = ThreadPoolExecutor(1, thread_name_prefix="megtrace-replay")
    started = threading.Event()

    def job():
        started.set()
        return run()
    future = pool.submit(job)
    started.wait()
    return future
