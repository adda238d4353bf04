"""MetaSchedule's working conditions on a small CPU box, set up so tuning really runs.

Three silent failures are avoided here (tvm-notes.md):
- `import tvm.s_tir.tensor_intrin` costs ~25 s (mostly CUDA intrinsics) in the main
  process (TuneContext imports it) and again in every builder worker, where the
  default 30 s build timeout then turns every candidate into a timeout and tuning
  "finishes" with 0 trials. `light_intrinsics` registers only the target's family and
  the builder below never imports the package.
- measuring with the runner's own thread count instead of the deployment's:
  `thread_env` sets TVM_NUM_THREADS for the worker processes it spawns.
- the console table MetaSchedule prints after every batch: `quiet_console` keeps it in
  the work_dir logs only.
"""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator

from ._tvm import tvm
from .executable import is_host

_INTRIN = "tvm.s_tir.tensor_intrin"


@contextlib.contextmanager
def light_intrinsics(target: Any) -> Iterator[None]:
    """While tuning, make `import tvm.s_tir.tensor_intrin` register only the target's
    intrinsics. Afterwards the package imports for real again (what was registered
    stays registered)."""
    tvm()
    if _INTRIN in sys.modules:          # the real package is loaded: nothing to save
        yield
        return
    spec = importlib.util.find_spec(_INTRIN)
    stub = importlib.util.module_from_spec(spec)     # the package, __init__ not run
    sys.modules[_INTRIN] = stub
    try:
        for name in _families(target):
            importlib.import_module(f"{_INTRIN}.{name}")
        yield
    finally:
        if sys.modules.get(_INTRIN) is stub:
            del sys.modules[_INTRIN]
            parent = sys.modules.get("tvm.s_tir")
            if parent is not None and getattr(parent, "tensor_intrin", None) is stub:
                delattr(parent, "tensor_intrin")


def _families(target: Any) -> list[str]:
    if target.kind.name == "cuda":
        return ["cuda"]
    triple = str(target.attrs.get("mtriple", "") or "")
    if triple.startswith(("aarch64", "arm")):
        return ["arm_cpu"]
    if triple.startswith("riscv"):
        return ["riscv_cpu"]
    return ["x86"]


def fast_builder(target: Any, timeout_sec: float = 60.0, max_workers: int | None = None):
    """A LocalBuilder whose workers build without importing tensor_intrin, and link
    for a foreign CPU with its cross gcc."""
    from tvm.s_tir.meta_schedule.builder import LocalBuilder
    linker = None
    if target.kind.name == "llvm" and not is_host(target):
        import shutil
        triple = str(target.attrs.get("mtriple"))
        linker = shutil.which(f"{triple}-gcc")
        if linker is None:
            raise RuntimeError(f"tune: measuring on a {triple} device needs {triple}-gcc "
                               "on PATH to link the candidates")
    return LocalBuilder(f_build=_make_build(), f_export=_make_export(linker),
                        timeout_sec=timeout_sec, max_workers=max_workers)


def _make_build():
    # Nested, so cloudpickle sends it by value: a worker then imports nothing of
    # megtrace, only the TVM modules below.
    def build(mod, target, _params):
        from tvm.driver import build as tvm_build
        from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
        return tvm_build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod),
                         target=target)
    return build


def _make_export(linker: str | None):
    if linker is None:
        return None                      # MetaSchedule's default (host compiler)

    def export(rt_mod):
        import os as _os
        import tempfile
        from tvm.support import cc
        path = _os.path.join(tempfile.mkdtemp(prefix="tvm-tuning-build-"), "tvm_tmp_mod.so")
        rt_mod.export_library(path, fcompile=cc.cross_compiler(linker))
        return path
    return export


@dataclass(frozen=True)
class RemoteDevice:
    """Where to measure through an RPC tracker (`python -m tvm.exec.rpc_tracker`, and
    on the device `python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY`; start
    the server with TVM_NUM_THREADS set to the deployment thread count)."""

    tracker_host: str
    tracker_port: int
    key: str
    session_timeout_sec: float = 60.0

    def __post_init__(self):
        if not isinstance(self.tracker_host, str) or not self.tracker_host:
            raise ValueError(f"tracker_host: expected a host name; got {self.tracker_host!r}")
        if not isinstance(self.tracker_port, int) or not 0 < self.tracker_port < 65536:
            raise ValueError(f"tracker_port: expected a TCP port; got {self.tracker_port!r}")
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"key: expected the device key the server registered with; "
                             f"got {self.key!r}")


def make_runner(remote: RemoteDevice | None, timeout_sec: float = 30.0,
                repeat: int = 1, min_repeat_ms: int = 100, max_workers: int = 1):
    """MetaSchedule's LocalRunner, or its RPCRunner for a device behind a tracker."""
    from tvm.s_tir.meta_schedule.runner import (EvaluatorConfig, LocalRunner, RPCConfig,
                                                RPCRunner)
    evaluator = EvaluatorConfig(number=1, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                enable_cpu_cache_flush=False)
    if remote is None:
        return LocalRunner(timeout_sec=timeout_sec, evaluator_config=evaluator)
    config = RPCConfig(tracker_host=remote.tracker_host, tracker_port=remote.tracker_port,
                       tracker_key=remote.key,
                       session_timeout_sec=int(remote.session_timeout_sec))
    return RPCRunner(rpc_config=config, evaluator_config=evaluator, max_workers=max_workers)


@contextlib.contextmanager
def thread_env(num_threads: int) -> Iterator[None]:
    """TVM_NUM_THREADS for the worker processes started inside the block."""
    old = os.environ.get("TVM_NUM_THREADS")
    os.environ["TVM_NUM_THREADS"] = str(num_threads)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TVM_NUM_THREADS", None)
        else:
            os.environ["TVM_NUM_THREADS"] = old


@contextlib.contextmanager
def quiet_console(quiet: bool = True) -> Iterator[None]:
    """Keep MetaSchedule's per-batch tables out of the console (they stay in the logs).

    MetaSchedule's logging set-up also fails on any handler without a name attached to
    its logger (pytest attaches such handlers): those are detached while it runs."""
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    old = logger.level
    unnamed = [h for h in logger.handlers if h.get_name() is None]
    for h in unnamed:
        logger.removeHandler(h)
    if quiet:
        logger.setLevel(logging.ERROR)   # MetaSchedule copies it to its console handler
    try:
        yield
    finally:
        logger.setLevel(old)
        for h in unnamed:
            logger.addHandler(h)
