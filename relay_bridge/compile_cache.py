"""A persistent cache of compiled graphs, so that a second process (or a notebook
restart) running the same traced function loads the library instead of building it.

An entry is keyed by everything a build depends on: the graph's structure and
constants (weights hashed by value), the target, the build options, whether the CPU
rules are on, the megtrace and TVM versions, and a digest of the source that lowers and
schedules (megtrace/ops, relay_bridge), so that an edited rule never serves an old
kernel. Entries live under $MEGTRACE_CACHE_DIR (default ~/.cache/megtrace/compiled) as
`<key>-<sha12>.so` plus `<key>.json`, written atomically (the library first, under its
own digest, then the manifest naming it), so concurrent writers never tear an entry.
A loaded entry is checked like an exported library (size, sha256, the CPU's ISA; see
deploy.check_library) and a bad one is removed and rebuilt. The cache keeps to
$MEGTRACE_CACHE_MAX_MB (default 2048), least recently used entries go first.
MEGTRACE_COMPILE_CACHE=0 turns it off.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

from megtrace import atomic_io
from megtrace.ir import Graph

from ._tvm import tvm
from .cpu.amx_conv import mode as amx_conv_mode
from .cpu.attention import mode as attention_mode
from .cpu.batch_split import enabled as batch_split_enabled
from .cpu.fast_math import mode as fast_math_mode
from .cpu.pointwise_depthwise import mode as expand_depthwise_mode
from .cpu.winograd import mode as winograd_mode
from .executable import Built, BuildOptions, is_host, uses_cpu_rules
from .export import _quiet_stderr

log = logging.getLogger(__name__)

# what this process did, for tests and for `megtrace` users who wonder
stats = {"hits": 0, "misses": 0, "stores": 0, "rejected": 0, "skipped": 0, "reused": 0}

_ORPHAN_SECONDS = 600          # a library no manifest names (a writer lost the race)
_WRITER_SECONDS = 900          # a writer process killed after this long
_MAX_WRITERS = 2               # background writers alive at once, at most
_pending: list[int] = []       # read ends of the pipes of writers not yet waited for
# Builds whose entry a writer is still storing, by the read end of its pipe: the same
# graph compiled again meanwhile (the demo's without_host trace of the same net) takes
# this build instead of missing the cache and building it twice; dropped when the
# writer is done, so that at most _MAX_WRITERS executables are held here.
_in_flight: dict[int, tuple[str, Built]] = {}


def enabled() -> bool:
    return os.environ.get("MEGTRACE_COMPILE_CACHE", "1").lower() not in ("0", "false", "off")


def cache_dir() -> Path:
    folder = os.environ.get("MEGTRACE_CACHE_DIR")
    if folder:
        return Path(folder)
    return Path(os.path.expanduser("~")) / ".cache" / "megtrace" / "compiled"


def max_bytes() -> int:
    return int(float(os.environ.get("MEGTRACE_CACHE_MAX_MB", "2048")) * (1 << 20))


def cached_build(graph: Graph, target: Any, rules: bool | None, options: BuildOptions,
                 build: Callable[[], Built]) -> Built:
    """`build()`'s result, from the cache when an entry for this graph and target exists;
    a fresh build is stored by a writer process (the caller need not wait)."""
    if not cacheable(target, options):
        return build()
    key = entry_key(graph, target, rules, options)
    folder = cache_dir()
    found = _load(folder, key, target)
    if found is not None:
        stats["hits"] += 1
        return found
    for pending_key, pending in _in_flight.values():
        if pending_key == key:
            stats["reused"] += 1
            return pending
    stats["misses"] += 1
    built = build()
    _store_aside(folder, key, built)
    return built


def cacheable(target: Any, options: BuildOptions) -> bool:
    """This machine's CPU only (a loaded library must run here), never with tuning
    records (their database is not in the key)."""
    return enabled() and is_host(target) and options.tuning_dir is None


def wait_for_stores() -> None:
    """Block until every entry this process started writing is written."""
    while _pending:
        fd = _pending.pop()
        _in_flight.pop(fd, None)
        with os.fdopen(fd, "rb") as done:
            done.read()                  # EOF: the writer exited


def _store_aside(folder: Path, key: str, built: Built) -> None:
    """Write the entry in a forked process, so that the caller goes on at once: TVM's
    export serializes every weight into the library (tens of seconds for ResNet-18 on
    a busy CPU) and prints a line per weight on fd 2. The writer is a grandchild (init
    reaps it) and outlives this process; a pipe tells wait_for_stores when it is done.
    Without fork the entry is written here, stderr silenced."""
    if not hasattr(os, "fork"):
        with _quiet_stderr():
            _store(folder, key, built)
        return
    _close_finished()
    if len(_pending) >= _MAX_WRITERS:   # a program compiling many graphs at once: the
        stats["skipped"] += 1           # rest is stored when compiled again, later
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                     # child: fork again and leave
        try:
            os.close(read_end)
            if os.fork() == 0:                       # grandchild: the writer
                _become_quiet_writer()
                _store(folder, key, built)
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    stats["stores"] += 1
    _close_finished()
    _pending.append(read_end)
    _in_flight[read_end] = (key, built)


def _close_finished() -> None:
    """Close the pipes of writers that have exited (readable at EOF), so that a process
    compiling many graphs without waiting keeps no descriptor per graph."""
    import select
    if not _pending:
        return
    done, _, _ = select.select(_pending, [], [], 0)
    for fd in done:
        _pending.remove(fd)
        _in_flight.pop(fd, None)
        os.close(fd)


def _become_quiet_writer() -> None:
    """The user's own work comes first: SCHED_IDLE (inherited by the C compiler the
    export runs) gets a core only when nothing else wants it and gives it up as soon as
    one of the user's threads wakes; a nice-19 task may still finish its time slice
    first, which a timing loop beside a fresh store (TVM's workers wake per kernel) can
    feel. Nice 19 stays where SCHED_IDLE is refused."""
    import signal
    signal.alarm(_WRITER_SECONDS)                    # never linger if TVM hangs
    with contextlib.suppress(OSError):
        os.nice(19)                                  # where SCHED_IDLE is refused
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


# -- the key --------------------------------------------------------------------------
def entry_key(graph: Graph, target: Any, rules: bool | None, options: BuildOptions) -> str:
    h = hashlib.sha256()
    for part in (str(target), repr(options), str(uses_cpu_rules(target, rules)),
                 winograd_mode(), amx_conv_mode(), fast_math_mode(),
                 expand_depthwise_mode(), attention_mode(), str(batch_split_enabled()),
                 _versions(), str(graph)):
        h.update(part.encode())
        h.update(b"\0")
    for array in graph.consts.values():
        h.update(f"{array.dtype}{array.shape}".encode())
        h.update(memoryview(array.tobytes() if not array.flags.c_contiguous else array)
                 .cast("B"))
    return h.hexdigest()[:40]


_VERSIONS: str | None = None


def _versions() -> str:
    """megtrace's and TVM's versions and a digest of the code that decides kernels."""
    global _VERSIONS
    if _VERSIONS is None:
        import megtrace
        root = Path(megtrace.__file__).resolve().parent
        h = hashlib.sha256()
        for folder in (root / "ops", (root / "relay_bridge").resolve()):
            for path in sorted(folder.rglob("*.py")):
                h.update(str(path.relative_to(folder)).encode())
                h.update(path.read_bytes())
        _VERSIONS = f"{megtrace.__version__} {tvm().__version__} {h.hexdigest()}"
    return _VERSIONS


# -- reading --------------------------------------------------------------------------
def _load(folder: Path, key: str, target: Any) -> Built | None:
    manifest_path = folder / f"{key}.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return _reject(folder, key, f"unreadable manifest ({e})")
    try:
        from .deploy import check_library
        library = folder / manifest["library"]
        if Path(manifest["library"]).name != manifest["library"]:
            raise ValueError("the manifest names a library outside the cache")
        if manifest.get("target_str") != str(target):
            raise ValueError("the manifest is for another target")
        check_library(library, manifest)
        with _quiet_stderr():            # a line per weight, as for export
            module = tvm().runtime.load_module(str(library))
    except Exception as e:       # any damage: the entry goes, the graph is built again
        return _reject(folder, key, str(e))
    with contextlib.suppress(OSError):
        os.utime(manifest_path)               # recently used: evicted last
    return Built(module, target, manifest["pipeline"], 0.0, list(manifest["rules"]),
                 list(manifest["kernels"]), cached=True)


def _reject(folder: Path, key: str, why: str) -> None:
    stats["rejected"] += 1
    log.warning("compile cache: dropping entry %s (%s); building again", key[:12], why)
    _remove_entry(folder, key)
    return None


def _remove_entry(folder: Path, key: str) -> None:
    manifest_path = folder / f"{key}.json"
    with contextlib.suppress(OSError):
        manifest_path.unlink()
    for library in folder.glob(f"{key}-*.so"):
        with contextlib.suppress(OSError):
            library.unlink()


# -- writing --------------------------------------------------------------------------
def _store(folder: Path, key: str, built: Built) -> None:
    """Library under its own digest, then the manifest that names it (atomic renames:
    a reader sees the old entry, none, or the whole new one)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        scratch = folder / f"{key}-{os.getpid()}.so"
        with atomic_io.atomic_path(scratch) as tmp:
            built.executable.export_library(str(tmp))
        from .deploy import library_digest
        size, digest = library_digest(scratch)
        library = folder / f"{key}-{digest[:12]}.so"
        os.replace(scratch, library)
        manifest = {"library": library.name, "library_size": size, "library_sha256": digest,
                    "target": json.loads(str(built.target)), "target_str": str(built.target),
                    "pipeline": built.pipeline, "rules": list(built.rules),
                    "kernels": list(built.kernels), "build_seconds": built.seconds,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_io.write_text(folder / f"{key}.json", json.dumps(manifest, indent=1) + "\n")
        _evict(folder, max_bytes())
    except Exception as e:       # a full disk or a read-only home must not fail a build
        log.warning("compile cache: could not store entry %s: %s", key[:12], e)


def _evict(folder: Path, limit: int) -> None:
    """Drop least recently used entries (manifest mtime) until the folder fits `limit`,
    and libraries no manifest names once they are old enough not to be mid-write."""
    named: set[str] = set()
    entries = []
    for manifest_path in folder.glob("*.json"):
        try:
            library = json.loads(manifest_path.read_text())["library"]
            size = (folder / library).stat().st_size + manifest_path.stat().st_size
            entries.append((manifest_path.stat().st_mtime, manifest_path.stem, size))
            named.add(library)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    now = time.time()
    for library in folder.glob("*.so"):
        with contextlib.suppress(OSError):
            if library.name not in named and now - library.stat().st_mtime > _ORPHAN_SECONDS:
                library.unlink()
    total = sum(size for *_, size in entries)
    for _, key, size in sorted(entries):
        if total <= limit:
            break
        _remove_entry(folder, key)
        total -= size
