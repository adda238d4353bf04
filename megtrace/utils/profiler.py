"""`megtrace.utils.profiler`: MegEngine 1.13's Profiler, writing a Chrome trace
(`chrome://tracing`, Perfetto) of what megtrace runs while it is on:

- every op applied eagerly (category "op", with its input shapes), and every op a traced
  function applies in Python (category "traced": recorded on its first call, checked
  against the recording on later calls);
- every run of a traced function's compiled graph, and inside it each TVM kernel
  (timed by the VM's instrument, megtrace.relay_bridge.profile);
- `scope(name)` regions (a begin and an end event).

The file is `<path>/<pid>.chrome_timeline.json`, written when profiling stops (MegEngine
writes it when the Profiler is dumped or collected; the last profiled run wins).
MegEngine's "memory_flow.svg" format needs its device memory records and is refused.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from contextlib import ContextDecorator, contextmanager
from typing import Any, Iterator, List

from .. import atomic_io, dispatch
from ..logger import get_logger
from ..module import Module

__all__ = ["Profiler", "scope", "profile", "merge_trace_events", "is_profiling"]

_running: List["Profiler"] = []


class Profiler(ContextDecorator):
    """Profile what runs inside `with Profiler(path):` (or a function decorated with a
    Profiler). `with_scopes=True` also brackets each call of a megtrace.module Module in a
    scope named after its class (MegEngine's module scopes); `with_backtrace` is accepted
    as in MegEngine and records nothing more."""

    CHROME_TIMELINE = "chrome_timeline.json"
    valid_options = {"sample_rate": 0, "profile_device": 1, "num_tensor_watch": 10,
                     "enable_cupti": 0}
    valid_formats = {"chrome_timeline.json", "memory_flow.svg"}

    def __init__(self, path: str = "profile", format: str = "chrome_timeline.json",
                 formats: List[str] = None, with_backtrace: bool = False,
                 with_scopes: bool = False, **kwargs) -> None:
        formats = formats or [format]
        assert not isinstance(formats, str), "formats excepts list, got str"
        for f in formats:
            assert f in Profiler.valid_formats, "unsupported format {}".format(f)
            if f != self.CHROME_TIMELINE:
                raise NotImplementedError(f"Profiler: format {f!r} (MegEngine's device memory "
                                          "records) is not supported; use "
                                          "'chrome_timeline.json'")
        unknown = sorted(set(kwargs) - set(Profiler.valid_options))
        if unknown:
            raise TypeError(f"Profiler: unexpected options {unknown}")
        self._path = path
        self._formats = list(formats)
        self._options = {k: int(kwargs.get(k, v)) for k, v in Profiler.valid_options.items()}
        self.with_backtrace = with_backtrace
        self._with_scopes = with_scopes
        self._pid: Any = "<PID>"
        self._events: list[dict] = []
        self._origin = 0.0
        self._lock = threading.Lock()
        self._pending: list[dict] | None = None
        self._unpatch = None

    # -- MegEngine's surface -----------------------------------------------------------
    @property
    def path(self) -> str:
        fmt = self._formats[0] if len(self._formats) == 1 else \
            "{" + ",".join(self._formats) + "}"
        return self.format_path(self._path, self._pid, fmt)

    @property
    def directory(self) -> str:
        return self._path

    @property
    def formats(self) -> list[str]:
        return list(self._formats)

    def format_path(self, path: str, pid, format: str) -> str:
        return os.path.join(path, "{}.{}".format(pid, format))

    def start(self) -> "Profiler":
        assert not _running, "a Profiler is running already"
        _running.append(self)
        self._pid = os.getpid()
        self._events = [{"name": "Metadata", "ph": "M", "pid": self._pid, "tid": 0,
                         "args": {"localTime": time.time() * 1e6}}]
        self._origin = time.perf_counter()
        dispatch.profile_hook = self
        if self._with_scopes:
            self._patch_module_call()
        return self

    def _patch_module_call(self) -> None:
        """Bracket calls of megtrace's own Module classes in scopes while profiling."""
        original = Module.__call__

        def call(module, *args, **kwargs):
            if type(module).__module__.startswith("megtrace.module"):
                with scope(type(module).__name__):
                    return original(module, *args, **kwargs)
            return original(module, *args, **kwargs)

        self._unpatch = lambda: setattr(Module, "__call__", original)
        Module.__call__ = call

    def stop(self) -> None:
        assert _running and _running[-1] is self, "this Profiler is not running"
        _running.pop()
        dispatch.profile_hook = None
        if self._unpatch is not None:
            self._unpatch()
            self._unpatch = None
        self._pending = self._events
        self.dump()

    def step(self) -> "Profiler":
        assert _running, "no Profiler is running"
        return self

    def dump(self) -> None:
        """Write the recorded events (once per start/stop)."""
        if self._pending is None:
            return
        if os.path.exists(self._path) and not os.path.isdir(self._path):
            get_logger().warning("{} is not a directory, cannot write profiling results"
                                 .format(self._path))
            return
        os.makedirs(self._path, exist_ok=True)
        path = self.format_path(self._path, self._pid, self.CHROME_TIMELINE)
        atomic_io.write_text(path, json.dumps({"traceEvents": self._pending}))
        get_logger().info("profiling results written to {}".format(path))
        self._pending = None

    def __enter__(self):
        self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def __call__(self, func):
        func = super().__call__(func)
        func.__profiler__ = self
        return func

    # -- what megtrace reports (dispatch.profile_hook) --------------------------------
    def now(self) -> float:
        return time.perf_counter()

    def _us(self, t: float) -> float:
        return (t - self._origin) * 1e6

    def _add(self, event: dict) -> None:
        event.setdefault("pid", self._pid)
        event.setdefault("tid", threading.get_ident() % (1 << 31))
        with self._lock:
            self._events.append(event)

    def op(self, name: str, start: float, inputs, traced: bool) -> None:
        """One op applied (eagerly, or inside a trace)."""
        shapes = [list(getattr(t, "shape", ())) for t in inputs]
        self._add({"name": name, "ph": "X", "cat": "traced" if traced else "op",
                   "ts": self._us(start), "dur": (self.now() - start) * 1e6,
                   "args": {"input_shapes": shapes}})

    def graph_run(self, name: str, start: float, report: dict | None) -> None:
        """One run of a compiled graph; `report` (relay_bridge.profile) times its
        kernels, relative to `start`."""
        self._add({"name": name, "ph": "X", "cat": "compiled_graph", "ts": self._us(start),
                   "dur": (self.now() - start) * 1e6})
        for rec in (report or {}).get("profiler", {}).get("host", {}).values():
            for kernel in rec.values():
                self._add({"name": kernel["name"], "ph": "X", "cat": "kernel",
                           "ts": self._us(start) + kernel["start"] * 1e6,
                           "dur": (kernel["end"] - kernel["start"]) * 1e6})

    def scope_event(self, name: str, phase: str) -> None:
        self._add({"name": name, "ph": phase, "cat": "scope", "ts": self._us(self.now())})


@contextmanager
def scope(name: str) -> Iterator[None]:
    """A named region of the profile (a begin and an end event)."""
    prof = _running[-1] if _running else None
    if prof is not None:
        prof.scope_event(name, "B")
    try:
        yield
    finally:
        if prof is not None:
            prof.scope_event(name, "E")


def is_profiling() -> bool:
    """Whether a Profiler is running now."""
    return bool(_running)


def profile(*args, **kwargs):
    """`@profile` or `@profile(path, ...)`: a Profiler as a decorator."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return Profiler()(args[0])
    return Profiler(*args, **kwargs)


def merge_trace_events(directory: str) -> None:
    """Merge the `<pid>.chrome_timeline.json` files of `directory` (several processes)
    into `directory/merge.chrome_timeline.json`, aligned on their start times."""
    names = [n for n in os.listdir(directory) if re.match(r"\d+\.chrome_timeline\.json$", n)]
    contents = []
    for name in names:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            content = json.load(f)
        events = content["traceEvents"] if isinstance(content, dict) else content
        meta = events[0]["args"] if events and events[0].get("name") == "Metadata" else None
        contents.append((events, meta))
    starts = [m["localTime"] for _, m in contents if m is not None]
    first = min(starts) if starts else 0.0
    merged = []
    for events, meta in contents:
        shift = (meta["localTime"] - first) if meta is not None else 0.0
        for event in events:
            if "ts" in event:
                event = dict(event, ts=event["ts"] + shift)
            merged.append(event)
    atomic_io.write_text(os.path.join(directory, "merge.chrome_timeline.json"),
                         json.dumps({"traceEvents": merged}))
