"""Running the compiled graph while Python replays (MegEngine's asynchronous dispatch).

A replayed call re-runs the user's Python to check it against the tape, but when every
input of the compiled graph is known before that Python runs (the arguments; outside
tensors frozen by capture_as_const; no random keys, no fed or external tensors), the
graph's results cannot depend on the replay. Its run then starts on a worker thread at
the start of the call (TVM releases the GIL while its kernels run) and the replay
waits for it only where a value is needed: the Python checking costs no latency on a
core the kernels do not use. A replay that fails its checks raises as before; the run's
results are then dropped, unread, and nothing was assigned.

It pays only with a core the kernels leave free and a thread that wakes at once: on an
idle machine with fewer kernel threads than cores the replay's Python then costs no
latency. On a loaded machine the worker's hand-back waits for the scheduler (the
shared 2-vCPU VM: +1.8 ms on MobileNetV2, slower than the sequential order; see
bench/bench_replay.py), so it is opt-in: MEGTRACE_REPLAY_OVERLAP=1 always, "auto" when
TVM's thread count (TVM_NUM_THREADS, which relay_bridge._tvm sets to all cores unless
the user set it) is below the cores this process may use, unset or 0 never (the
sequential order: Python, then the graph).
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
        given = os.environ.get(ENV, "0").strip().lower()
        if given == "auto":
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


def start(run: Callable[..., Any], *args: Any) -> Future:
    """`run(*args)` on this thread's worker; the Future gives its result or raises its
    error. Returns once the worker has started, so that the worker holds the GIL for
    the few Python lines before TVM takes over: otherwise it would wait for the GIL
    until the replaying thread yields it (up to sys.getswitchinterval(), 5 ms)."""
    pool = _workers.pool
    if pool is None:
        pool = _workers.pool = ThreadPoolExecutor(1, thread_name_prefix="megtrace-replay")
    started = threading.Event()

    def job():
        started.set()
        return run(*args)
    future = pool.submit(job)
    started.wait()
    return future
