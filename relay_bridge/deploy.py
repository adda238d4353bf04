"""Run a model exported by `megtrace.relay_bridge.export` with nothing but TVM and NumPy.

Deliberately standalone: it imports nothing from megtrace or the rest of relay_bridge,
so a deployment needs only the exported library, its JSON manifest and this file
(copy it next to them):

    import deploy
    model = deploy.load("model.so")
    out = model(x)                 # by position, or model(data=x) by input name

The manifest (`<library>.json`) names, shapes and dtypes the inputs and outputs, so
bad feeds fail with a ValueError naming the input before TVM sees them.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "megtrace-export"
FORMAT_VERSION = 1


def manifest_path(library: str | os.PathLike) -> Path:
    """Where the manifest of `library` lives: the library's name plus ".json"."""
    return Path(str(os.fspath(library)) + ".json")


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a library (given the library's path or the manifest's)."""
    path = Path(os.fspath(path))
    mpath = path if path.suffix == ".json" else manifest_path(path)
    if not mpath.is_file():
        raise FileNotFoundError(f"path: no manifest {str(mpath)!r}; export writes it next "
                                "to the library")
    with open(mpath, "rb") as f:
        return parse_manifest(f.read(), str(mpath))


def parse_manifest(data: bytes, where: str = "manifest") -> dict[str, Any]:
    """Check a manifest's JSON: every field the runner reads, with its type; anything
    else is a ValueError naming the file and the field."""
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"path: {where!r} is not JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"path: {where!r} is not a megtrace export manifest")
    version = manifest.get("format_version", 0)
    if not isinstance(version, int):
        raise ValueError(f"path: {where!r}: format_version must be an int")
    if version > FORMAT_VERSION:
        raise ValueError(f"path: manifest version {version} is newer "
                         f"than this runner ({FORMAT_VERSION}); update deploy.py")
    if not isinstance(manifest.get("library"), str) or "/" in manifest["library"]:
        raise ValueError(f"path: {where!r}: 'library' must be a file name")
    for key in ("inputs", "outputs"):
        items = manifest.get(key)
        if not isinstance(items, list) or not all(_is_io(i) for i in items):
            raise ValueError(f"path: {where!r}: {key!r} must be a list of "
                             "{name, shape, dtype} entries")
    for key, kind in (("target", dict), ("num_threads", int), ("device", str),
                      ("library_size", int), ("library_sha256", str)):
        if key in manifest and not isinstance(manifest[key], kind):
            raise ValueError(f"path: {where!r}: {key!r} must be a {kind.__name__}")
    return manifest


def _is_io(item: Any) -> bool:
    if not (isinstance(item, dict) and isinstance(item.get("name"), str)
            and isinstance(item.get("shape"), list)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                    for d in item["shape"])
            and isinstance(item.get("dtype"), str) and item["dtype"] in _DTYPES):
        return False
    return True


# The dtypes an export writes (np.dtype would also parse arbitrary strings such as
# "f4,(2)i" through ast.literal_eval, which a manifest has no business asking for).
_DTYPES = frozenset({"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                     "uint64", "float16", "bfloat16", "float32", "float64"})


def library_digest(library: str | os.PathLike) -> tuple[int, str]:
    """(size in bytes, sha256 hex) of a library file, as its manifest records them."""
    h = hashlib.sha256()
    size = 0
    with open(library, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


# ISA extensions whose absence makes a library die with SIGILL: LLVM's feature name ->
# the Linux /proc/cpuinfo flag (x86) that says the CPU and OS enable it.
_X86_ISA = {"sse4.1": "sse4_1", "sse4.2": "sse4_2", "avx": "avx", "avx2": "avx2",
            "fma": "fma", "f16c": "f16c", "bmi2": "bmi2", "avx512f": "avx512f",
            "avx512bw": "avx512bw", "avx512dq": "avx512dq", "avx512vl": "avx512vl",
            "avx512cd": "avx512cd", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16",
            "avx512fp16": "avx512_fp16", "avxvnni": "avx_vnni", "amx-tile": "amx_tile"}


def host_cpu_flags() -> set[str] | None:
    """The ISA flags the OS reports for this CPU (/proc/cpuinfo), None where unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


@functools.cache
def request_amx() -> bool:
    """Ask Linux for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM, once per
    process): without it the first tile instruction dies with SIGILL."""
    if platform.system() != "Linux" or platform.machine() != "x86_64" or \
            not {"amx_tile", "amx_bf16"} <= (host_cpu_flags() or set()):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(158, 0x1023, 18) == 0      # arch_prctl, XTILEDATA
    except (OSError, AttributeError):
        return False


def check_library(library: Path, manifest: dict[str, Any]) -> None:
    """Refuse, before dlopen, a library that is not the one its manifest describes (a
    torn or swapped file would crash the process with SIGBUS) or that needs ISA
    extensions this CPU lacks (SIGILL)."""
    want_size, want_hash = manifest.get("library_size"), manifest.get("library_sha256")
    if want_size is not None:
        size, digest = library_digest(library)
        if size != want_size or digest != want_hash:
            raise ValueError(f"{str(library)!r}: the library does not match its manifest "
                             f"({size} bytes, sha256 {digest[:12]}..., the manifest says "
                             f"{want_size} bytes, {str(want_hash)[:12]}...): it is truncated "
                             "or from another export; export again")
    missing = sorted(_missing_isa(manifest.get("target") or {}))
    if missing:
        raise ValueError(f"{str(library)!r} was built for {manifest['target'].get('mcpu')} and "
                         f"needs CPU features this machine lacks: {', '.join(missing)}; "
                         "export it for this machine's target")
    mattr = (manifest.get("target") or {}).get("mattr") or []
    if "+amx-tile" in mattr and not request_amx():
        raise ValueError(f"{str(library)!r} uses AMX tiles and Linux refused this process "
                         "their state (arch_prctl ARCH_REQ_XCOMP_PERM); export it with "
                         "MEGTRACE_AMX=0")


def _missing_isa(target: dict[str, Any]) -> set[str]:
    if target.get("kind") != "llvm":
        return set()
    triple = str(target.get("mtriple", "") or "")
    import platform
    if triple and triple.split("-")[0] != platform.machine():
        raise ValueError(f"the library was built for {triple}, this machine is "
                         f"{platform.machine()}")
    flags = host_cpu_flags()
    if flags is None or platform.machine() not in ("x86_64", "AMD64"):
        return set()
    import tvm
    spec = {k: v for k, v in target.items() if k not in ("tag", "keys")}
    features = tvm.target.codegen.llvm_get_cpu_features(tvm.target.Target(spec))
    return {name for name, flag in _X86_ISA.items() if name in features and flag not in flags}


class DeployedModel:
    """An exported model, loaded: call it with NumPy arrays, get a list of arrays.
    Safe to call from several threads: each thread runs its own VM over the one
    loaded library (a VM keeps registers and outputs between calls)."""

    def __init__(self, library: str | os.PathLike, manifest: dict[str, Any]):
        self.library = Path(os.fspath(library))
        self.manifest = manifest
        self.inputs: list[dict[str, Any]] = manifest["inputs"]
        self.outputs: list[dict[str, Any]] = manifest["outputs"]
        # TVM sizes its thread pool when it is first imported; the count the model was
        # built and tuned for wins unless the user set one (or TVM is already running).
        if "tvm" not in sys.modules:
            os.environ.setdefault("TVM_NUM_THREADS", str(manifest.get("num_threads", 1)))
        import tvm
        from tvm.runtime.vm import VirtualMachine
        self._tvm = tvm
        kind = manifest.get("device", "cpu")
        self.device = tvm.cpu(0) if kind == "cpu" else tvm.device(kind, 0)
        check_library(self.library, manifest)
        self._module = tvm.runtime.load_module(str(self.library))
        self._vm_class = VirtualMachine
        self._per_thread = threading.local()
        self._main_for_this_thread()          # fail at load time, not on the first call

    def _main_for_this_thread(self):
        state = self._per_thread
        if getattr(state, "main", None) is None:
            state.vm = self._vm_class(self._module, self.device)
            state.main = state.vm["main"]
        return state.main

    def _feed(self, args: tuple, named: dict) -> list[np.ndarray]:
        names = [i["name"] for i in self.inputs]
        if len(args) > len(names):
            raise ValueError(f"inputs: the model takes {len(names)} inputs {names}; got "
                             f"{len(args)} positional arrays")
        feed = dict(zip(names, args))
        for key, value in named.items():
            if key not in names:
                raise ValueError(f"{key}: not an input of the model; inputs are {names}")
            if key in feed:
                raise ValueError(f"{key}: given both by position and by name")
            feed[key] = value
        arrays = []
        for info in self.inputs:
            name = info["name"]
            if name not in feed:
                raise ValueError(f"{name}: missing input (inputs are {names})")
            arr = np.asarray(feed[name])
            if arr.dtype != np.dtype(info["dtype"]):
                raise ValueError(f"{name}: expected dtype {info['dtype']}, got {arr.dtype}")
            if tuple(arr.shape) != tuple(info["shape"]):
                raise ValueError(f"{name}: expected shape {tuple(info['shape'])}, got "
                                 f"{tuple(arr.shape)} (the library was built for that "
                                 "shape; export again for another)")
            arrays.append(np.ascontiguousarray(arr))
        return arrays

    def __call__(self, *args: np.ndarray, **named: np.ndarray) -> list[np.ndarray]:
        """Outputs in order, as NumPy arrays."""
        tensors = [self._tvm.runtime.tensor(a, self.device) for a in self._feed(args, named)]
        result = self._main_for_this_thread()(*tensors)
        return [r.numpy() for r in result]

    def run(self, *args: np.ndarray, **named: np.ndarray) -> dict[str, np.ndarray]:
        """Outputs by name."""
        return dict(zip((o["name"] for o in self.outputs), self(*args, **named)))

    def __repr__(self) -> str:
        ins = ", ".join(f"{i['name']}: {i['dtype']}{list(i['shape'])}" for i in self.inputs)
        return f"DeployedModel({self.library.name}, inputs=[{ins}])"


def load(path: str | os.PathLike) -> DeployedModel:
    """Load an exported library (or its manifest's path) for running."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path; got {type(path).__name__}")
    manifest = read_manifest(path)
    path = Path(os.fspath(path))
    library = path.with_name(manifest["library"]) if path.suffix == ".json" else path
    if not library.is_file():
        raise FileNotFoundError(f"path: no library {str(library)!r}")
    return DeployedModel(library, manifest)
