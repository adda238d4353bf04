"""`export`: a model as one shared library (weights embedded) plus a JSON manifest, for
running without megtrace (see deploy.py); `load_exported` loads it back.

The manifest records what a runner must know and TVM's library does not say: input
and output names, shapes and dtypes, the target, the thread count it was built for,
and the megtrace and TVM versions that made it.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megtrace import atomic_io
from megtrace.version import __version__

from ._tvm import tvm
from .cross import linker_for
from .deploy import (FORMAT, FORMAT_VERSION, DeployedModel, library_digest, load,
                     manifest_path)
from .executable import Built, build_executable
from .source import graph_of, options_of
from .targets import resolve


@dataclass
class Exported:
    """What `export` wrote."""

    library: Path
    manifest: Path
    target: str           # the TVM target, as JSON
    pipeline: str         # "cpu-rules", "default" or "tuned"
    seconds: float        # build + export


def export(model: Any, path: str | os.PathLike, target: Any = None, *,
           arg_names: Any = None, output_names: Any = None,
           tuning_dir: str | os.PathLike | None = None,
           num_threads: int | None = None) -> Exported:
    """Write `model` to `path` (.so, or .tar of object files) and `<path>.json`.

    model: a traced function (called once), a `load_graph` model, a Graph or a
    CompiledGraph. target: None (the model's own, else this machine), a preset name
    such as "aarch64" or "cuda-sm90", a TVM target dict or Target; a foreign CPU links
    with its cross gcc. tuning_dir: a `tune` work_dir whose records to build with.
    num_threads: the thread count the runner uses (default: the target's "num-cores",
    else every core of this machine). arg_names / output_names: the manifest's input and
    output names, as trace.dump takes them (default: the graph's, which are the dump's
    defaults too: arg_0, ... and output_0, ...; a loaded model keeps its file's names).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path; got {type(path).__name__}")
    path = Path(os.fspath(path))
    if path.suffix not in (".so", ".tar"):
        raise ValueError(f"path: expected a library name ending in .so or .tar; got "
                         f"{str(path)!r}")
    if not path.parent.is_dir():
        raise ValueError(f"path: the folder {str(path.parent)!r} does not exist")
    if num_threads is not None and (isinstance(num_threads, bool) or
                                    not isinstance(num_threads, int) or num_threads < 1):
        raise ValueError(f"num_threads: expected a positive int; got {num_threads!r}")
    graph, own_target = graph_of(model)
    in_names = _names("arg_names", arg_names, list(graph.input_names))
    out_names = _names("output_names", output_names, list(graph.output_names))
    start = time.perf_counter()
    built = _build(model, graph, target if target is not None else own_target, tuning_dir,
                   num_threads)
    fcompile = linker_for(built.target, path)
    # The library is written beside its final name and renamed into place, then the
    # manifest (which records the library's size and hash, so a library and manifest of
    # different exports are told apart when an export was killed between the two).
    with atomic_io.atomic_path(path) as tmp, _quiet_stderr():
        built.executable.export_library(str(tmp), fcompile=fcompile)
    threads = num_threads or _threads_of(built.target)
    manifest = _manifest(graph, built, path.name, threads, in_names, out_names)
    manifest["library_size"], manifest["library_sha256"] = library_digest(path)
    mpath = manifest_path(path)
    atomic_io.write_text(mpath, json.dumps(manifest, indent=1) + "\n")
    return Exported(path, mpath, str(built.target), built.pipeline,
                    time.perf_counter() - start)


def load_exported(path: str | os.PathLike) -> DeployedModel:
    """Load what `export` wrote (the library's path or the manifest's); callable with
    arrays by position or input name, returning a list of NumPy arrays."""
    with _quiet_stderr():        # one "Scope Loaded" warning per embedded weight
        return load(path)


def _build(model: Any, graph: Any, target: Any, tuning_dir: Any,
           num_threads: int | None) -> Built:
    # lazy: build imports compile_cache, which imports this module (a cycle left to fix)
    from .build import CompiledGraph
    if tuning_dir is not None:
        from .tuning import tuned_executable
        return tuned_executable(graph, target, tuning_dir, num_threads=num_threads)
    tgt = resolve(target)
    if isinstance(model, CompiledGraph) and str(model.target) == str(tgt) and \
            not model.cached:
        return Built(model.executable, tgt, model.pipeline, model.build_seconds,
                     list(model.rules))
    return build_executable(graph, tgt, options=options_of(model))


def _threads_of(target: Any) -> int:
    cores = target.attrs.get("num-cores")
    return int(cores) if cores is not None else (os.cpu_count() or 1)


def _names(what: str, given: Any, default: list[str]) -> list[str]:
    """Names as trace.dump takes them: a str (one value), or one per value (None keeps
    the default), unique and non-empty."""
    if given is None:
        return default
    names = [given] if isinstance(given, str) else list(given)
    if len(names) != len(default):
        raise ValueError(f"{what}: expected {len(default)} names, got {len(names)}: {names}")
    names = [d if n is None else n for n, d in zip(names, default)]
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ValueError(f"{what}: names must be unique non-empty strings; got {names}")
    return names


def _manifest(graph: Any, built: Built, library: str, threads: int, in_names: list[str],
              out_names: list[str]) -> dict[str, Any]:
    def io(vars_, names):
        return [{"name": n, "shape": list(v.type.shape), "dtype": v.type.dtype}
                for v, n in zip(vars_, names)]
    target = json.loads(str(built.target))
    kind = built.target.kind.name
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "library": library,
        "inputs": io(graph.inputs, in_names),
        "outputs": io(graph.outputs, out_names),
        "target": target, "device": "cpu" if kind == "llvm" else kind,
        "num_threads": threads, "pipeline": built.pipeline, "rules": built.rules,
        "megtrace_version": __version__, "tvm_version": tvm().__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


class _quiet_stderr:
    """Silence C++ log lines written straight to fd 2 (Python errors still surface as
    exceptions). Set MEGTRACE_VERBOSE_EXPORT=1 to see them."""

    def __enter__(self):
        self._saved = None
        if os.environ.get("MEGTRACE_VERBOSE_EXPORT", "0") not in ("0", ""):
            return self
        try:
            self._saved = os.dup(2)
        except OSError:
            return self
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
        return False
