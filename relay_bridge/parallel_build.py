"""Build a Relax module's kernels on several threads (issue 11: first-call build time).

`relax.build` hands every TIR kernel to one LLVM module: one thread generates and
optimizes the IR of all of them, and the machine code is made later, on the thread
that first creates a VM (the lazy JIT). For ResNet-18 that is ~85% of a build (2.2 s of
codegen and 1.6 s of JIT in CPU time, 15 distinct convolution kernels). Here the Relax
passes run as in `relax.build`; the kernels are then split into `threads` TIR modules
built (and, for this machine, JIT-compiled) at once on a thread pool (TVM's FFI calls
release the GIL), and linked into one executable: the first module imports the others
and the VM finds each kernel by name through the imports. Each kernel is compiled by
the same LLVM passes as before, only in a smaller module, so its code is the same.

The steps mirror tvm.relax.vm_build.build (TVM 0.27, pinned in pyproject): it has no
public hook between its TIR build and its link.
"""
from __future__ import annotations

import importlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ._tvm import relax, tvm
from .early_build import EarlyBuilds, stats as early_stats


def build_threads() -> int:
    """$MEGTRACE_BUILD_THREADS, else the cores this process may use (at most 4: the
    kernels of a model split into few modules of similar size)."""
    given = os.environ.get("MEGTRACE_BUILD_THREADS")
    if given:
        return max(1, int(given))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:           # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def build_context() -> Any:
    """The pass context every build of a Relax module and its kernels runs in."""
    return tvm().transform.PassContext(opt_level=3)


def build_module(functions: dict, tgt: Any, context: Any, jit: bool, tir_pipeline: str,
                 attrs: Any = None) -> Any:
    """The runtime module of the TIR `functions` {GlobalVar or name: PrimFunc}, built in
    `tgt` and `context` (on any thread); `jit`: make its machine code now."""
    t = tvm()
    with tgt, context:
        lib = t.tirx.build(t.IRModule(functions, attrs=attrs), target=tgt,
                           pipeline=tir_pipeline)
    if jit:
        # LLVM makes machine code for the whole module on the first lookup
        name = next(iter(functions.values())).attrs["global_symbol"]
        lib.get_function(str(name), query_imports=False)
    return lib


def parallel_build(mod: Any, tgt: Any, pipeline: Any, threads: int, jit: bool,
                   tir_pipeline: str = "default", early: EarlyBuilds | None = None) -> Any:
    """`relax.build(mod, tgt, relax_pipeline=pipeline, tir_pipeline=tir_pipeline)` with
    the kernels built on `threads` threads; `jit`: also make their machine code there (a
    build for this machine's CPU, about to run); `early`: kernels the lowering offered
    to early_build.py, whose modules are linked instead of building them here. Call it
    inside `with tgt, PassContext(...)`."""
    t = tvm()
    vm_build = importlib.import_module("tvm.relax.vm_build")
    with tgt:
        mod = pipeline(mod)
    attrs = dict(mod.attrs) if mod.attrs else {}
    params = dict(attrs.get("const_name_to_constant", {}))
    builder = relax().ExecBuilder()
    mod = vm_build._vmcodegen(builder, mod, "bytecode")
    tir_mod = vm_build._filter_tir(mod)
    device_libs, relax_libs = [], []
    for ext in attrs.get("external_mods", []):
        (device_libs if vm_build._is_device_module(ext) else relax_libs).append(ext)
    lib = None
    if tir_mod is not None and len(tir_mod.get_global_vars()) > 0:
        tir_mod = vm_build._auto_attach_system_lib_prefix(tir_mod, tgt, None)
        libs = _build_parts(t, tir_mod, tgt, threads, jit, tir_pipeline, early)
        lib = libs[0]
        for other in libs[1:] + device_libs:
            lib.import_module(other)
    return vm_build.VMExecutable(vm_build._ffi_api.VMLink(builder, tgt, lib, relax_libs,
                                                          params))


def _build_parts(t: Any, tir_mod: Any, tgt: Any, threads: int, jit: bool,
                 tir_pipeline: str, early: EarlyBuilds | None = None) -> list:
    """The kernels of `tir_mod` as runtime modules: those `early` built (or is building)
    unchanged, the rest in up to `threads` modules, in module order dealt round-robin
    (neighbouring kernels of a network differ most in size)."""
    items = sorted(tir_mod.functions.items(), key=lambda kv: kv[0].name_hint)
    context = t.transform.PassContext.current()   # thread-local: each worker enters it
    early_parts = early.take({gv.name_hint: f for gv, f in items}) if early else []
    taken = {name for _, names in early_parts for name in names}
    items = [kv for kv in items if kv[0].name_hint not in taken]

    def build(functions: dict) -> Any:
        return build_module(functions, tgt, context, jit, tir_pipeline, tir_mod.attrs)
    count = max(1, min(threads, len(items)))
    parts = [dict(items[i::count]) for i in range(count)] if items else []
    if count == 1:
        libs = [build(p) for p in parts]
    else:
        with ThreadPoolExecutor(count, thread_name_prefix="megtrace-build") as pool:
            libs = list(pool.map(build, parts))
    by_name = {gv.name_hint: (gv, f) for gv, f in tir_mod.functions.items()}
    for future, names in early_parts:
        try:
            libs.append(future.result())
            early_stats["linked"] += len(names)
        except Exception:           # the worker's build failed: build those here
            early_stats["dropped"] += len(names)
            libs.append(build(dict(by_name[n] for n in names)))
    return libs
