"""Cross-compilation helpers: which linker makes a library for a foreign CPU, what
machine an ELF file is for, and CUDA's source and PTX from an executable built
without a GPU (TVM emits CUDA C; nvcc turns it into PTX only when asked)."""
from __future__ import annotations

import os
import shutil
import struct
import tarfile
from typing import Any, Callable

from ._tvm import tvm
from .executable import is_host

# e_machine values of the ELF header (System V ABI)
ELF_MACHINES = {3: "x86", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv"}


def linker_for(target: Any, path: str | os.PathLike) -> Callable | None:
    """The fcompile export_library needs for `target` (None: the host compiler).

    A .tar needs no compiler at all (object files). A foreign llvm triple links with
    `<triple>-gcc` (Debian: apt-get install gcc-aarch64-linux-gnu)."""
    if str(path).endswith(".tar") or target.kind.name != "llvm" or is_host(target):
        return None
    triple = str(target.attrs.get("mtriple"))
    compiler = shutil.which(f"{triple}-gcc")
    if compiler is None:
        raise RuntimeError(
            f"export: no cross linker {triple}-gcc on PATH for target {triple}; install one "
            "(Debian: apt-get install gcc-aarch64-linux-gnu) or export to a path ending in "
            ".tar, which holds the object files and needs no linker")
    from tvm.support import cc
    return cc.cross_compiler(compiler)


def elf_machine(path: str | os.PathLike) -> str:
    """The CPU an ELF object or shared library is for ("x86_64", "aarch64", ...)."""
    with open(path, "rb") as f:
        return _machine(f.read(20), os.fspath(path))


def tar_machines(path: str | os.PathLike) -> dict[str, str]:
    """ELF machine of every object file in an exported .tar, by member name."""
    with tarfile.open(path) as tf:
        return {m.name: _machine(tf.extractfile(m).read(20), m.name)
                for m in tf.getmembers() if m.isfile() and m.name.endswith(".o")}


def _machine(head: bytes, name: str) -> str:
    if head[:4] != b"\x7fELF":
        raise ValueError(f"path: {name!r} is not an ELF file")
    machine = struct.unpack(("<" if head[5] == 1 else ">") + "H", head[18:20])[0]
    return ELF_MACHINES.get(machine, f"e_machine={machine}")


def _modules(mod: Any):
    yield mod
    for sub in mod.imports:
        yield from _modules(sub)


def cuda_source(executable: Any) -> str:
    """The CUDA C that TVM generated for a CUDA target."""
    found = [m for m in _modules(executable.mod) if m.kind == "cuda"]
    if not found:
        raise ValueError("executable: it holds no CUDA module; was it built for a CUDA "
                         "target?")
    return "\n".join(m.inspect_source("") for m in found)


def compile_cuda(source: str, target: Any, fmt: str = "ptx") -> bytes:
    """Compile CUDA C with the toolkit's nvcc (compile-only: no GPU needed)."""
    if fmt not in ("ptx", "cubin", "fatbin"):
        raise ValueError(f"fmt: expected 'ptx', 'cubin' or 'fatbin'; got {fmt!r}")
    if shutil.which("nvcc") is None:
        raise FileNotFoundError("nvcc is not on PATH: install the CUDA toolkit to compile "
                                "CUDA C to PTX")
    tvm()
    from tvm.support import nvcc
    arch = str(target.attrs.get("arch", ""))
    if not arch.startswith("sm_"):
        raise ValueError(f"target: a CUDA target with an arch like 'sm_90' is needed; got "
                         f"{target}")
    with target:          # nvcc.compile_cuda reads the compute version from Target.current()
        return bytes(nvcc.compile_cuda(source, target_format=fmt, arch=arch,
                                       compiler="nvcc"))
