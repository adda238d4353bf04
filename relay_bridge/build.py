"""Build a Relax module for a target and run it with the Relax VM."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from megtrace.ir import Graph

from ._tvm import relax, tvm
from .compile_cache import cached_build
from .executable import BuildOptions, Built, build_executable, uses_cpu_rules
from .targets import resolve

__all__ = ["BuildOptions", "CompiledGraph", "InterpretedGraph", "compile_graph", "run_graph",
           "uses_cpu_rules"]


class _ThreadState(threading.local):
    """A thread's VM of a CompiledGraph (made on its first run there) and the aligned
    staging buffers of the inputs this thread hands to TVM (prepare may run on another
    thread than the VM's)."""

    def __init__(self):
        self.vm: Any = None
        self.main: Any = None
        self.staging: dict[int, np.ndarray] = {}


@dataclass
class CompiledGraph:
    """A graph compiled by TVM: call it with NumPy arrays, get a list of NumPy arrays.
    The VM is created on first call, so graphs built for other machines (aarch64, CUDA
    here) can still be inspected and exported.

    Calls may come from several threads at once: a Relax VM keeps its registers and
    output storage between calls, so each thread gets its own VM and staging buffers
    (the executable and its kernels are shared)."""

    graph: Graph
    target: Any
    executable: Any
    build_seconds: float
    rules: list[str] = field(default_factory=list)   # CPU rule kernels used (llvm only)
    pipeline: str = "default"                         # "cpu-rules", "default", "fused", "plain"
    kernels: list[str] = field(default_factory=list)  # TIR functions after fusion
    cached: bool = False       # loaded from the compile cache: a library, not re-exportable
    donates: bool = False      # built with BuildOptions.donate (see donate.py)

    def __post_init__(self):
        kind = self.target.kind.name
        self._device = tvm().cpu(0) if kind == "llvm" else tvm().device(kind, 0)
        self._per_thread = _ThreadState()
        # outputs of MegEngine's quantized dtypes: the kernels give their stored integers
        self._quantized_outputs = [(i, v.type.np_dtype) for i, v in enumerate(self.graph.outputs)
                                   if v.type.quant is not None]
        # inputs the kernels may write over (an output of the same shape and dtype)
        out_types = {(v.type.shape, v.type.dtype) for v in self.graph.outputs}
        self._donatable = frozenset(
            i for i, v in enumerate(self.graph.inputs)
            if self.donates and (v.type.shape, v.type.dtype) in out_types and v.type.size)

    @property
    def _main(self):
        """This thread's VM entry function (created on the thread's first call)."""
        state = self._per_thread
        main = state.main
        if main is None:
            state.vm = relax().VirtualMachine(self.executable, self._device)
            state.main = main = state.vm["main"]
        return main

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.prepare(*arrays)()

    def prepare(self, *arrays: np.ndarray) -> Callable[[], list[np.ndarray]]:
        """The run on `arrays`, its inputs handed to TVM now: the returned function only
        calls the VM (of the thread that calls it) and takes the outputs. A run started on
        another thread (jit/overlap.py) then makes no TVM call before the VM's, each of
        which would let the replaying thread take the GIL for its whole replay."""
        if self.target.kind.name != "llvm":
            t = tvm()
            args = [t.runtime.tensor(np.ascontiguousarray(_stored(a)), self._device)
                    for a in arrays]
            return lambda: self._quantized([r.numpy() for r in self._main(*args)])
        if self._donatable:     # the run may write over these: never the caller's arrays
            arrays = [_aligned_copy(_stored(np.asarray(a))) if i in self._donatable else a
                      for i, a in enumerate(arrays)]
        inputs = [self._host_tensor(i, a) for i, a in enumerate(arrays)]
        return lambda: self._outputs(self._main(*inputs), inputs)

    def _outputs(self, result: Any, inputs: list) -> list[np.ndarray]:
        # Outputs are taken through DLPack without a copy: the VM allocates every output
        # anew on each call (its memory plan covers intermediates only), so an array it
        # returned stays intact while held, and it is 64-byte aligned, so fed back as
        # the next call's input (a training step's parameters and optimizer states) it
        # passes without a staging copy. An output that is one of this call's input
        # buffers (a staging buffer is overwritten by the next call) is copied, unless
        # it is a donated input's copy made above (the run wrote the new value there).
        held = {t.data_ptr() for i, t in enumerate(inputs) if i not in self._donatable}
        return self._quantized([_owned(np.from_dlpack(r), held) for r in result])

    def _quantized(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        for i, dtype in self._quantized_outputs:
            outs[i] = outs[i].view(dtype)
        return outs

    def _host_tensor(self, slot: int, array: np.ndarray):
        """Hand a CPU array to the VM without tvm.runtime.tensor's allocation (~25 us):
        zero-copy when it is 64-byte aligned (TVM's DLPack rule), else through a reused
        aligned staging buffer of this thread."""
        array = _stored(np.asarray(array))
        if array.size == 0:     # NumPy gives empty arrays unaligned data pointers
            return tvm().runtime.tensor(array, self._device)
        if not (array.flags.c_contiguous and array.ctypes.data % 64 == 0):
            staging = self._per_thread.staging
            buf = staging.get(slot)
            if buf is None or buf.shape != array.shape or buf.dtype != array.dtype:
                buf = _aligned_empty(array.shape, array.dtype)
                staging[slot] = buf
            np.copyto(buf, array)
            array = buf
        return tvm().runtime.from_dlpack(array)


@dataclass
class InterpretedGraph:
    """A graph with 0-size values or ops without a Relax lowering, run by megtrace's NumPy
    interpreter: TVM cannot hold 0-size values (0-size constants do not load back from an
    executable, DLPack refuses 0-size NumPy buffers, Relax reshape reads a 0 in a target
    shape as "keep that axis"), and Relax has no matrix inverse or SVD."""

    graph: Graph
    target: Any
    executable: Any = None
    build_seconds: float = 0.0
    rules: list[str] = field(default_factory=list)
    pipeline: str = "numpy-interpreter"
    kernels: list[str] = field(default_factory=list)

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        from megtrace.interpreter import run
        return [np.asarray(v) for v in run(self.graph, *arrays)]


def has_empty_values(graph: Graph) -> bool:
    """Whether any input, constant or intermediate value of `graph` has 0 elements."""
    return any(v.type.size == 0 for v in graph.inputs) or \
        any(v.type.size == 0 for v in graph.consts) or \
        any(v.type.size == 0 for n in graph.nodes for v in n.outputs)


def has_unlowered_ops(graph: Graph) -> bool:
    """Whether `graph` uses an op Relax cannot express (matinv, svd: `OpDef.interpreted`)
    or one without a Relax lowering yet (roi_pooling, nms_keep, the deformable ops): such
    graphs run on the NumPy interpreter, like graphs with 0-size values."""
    return any(n.op.interpreted or n.op.lower is None for n in graph.nodes)


def _stored(array: np.ndarray) -> np.ndarray:
    """A quantized array (MegEngine's dtype metadata) as its stored integers."""
    return array.view(np.dtype(array.dtype.str)) if array.dtype.metadata else array


def _owned(array: np.ndarray, held: set[int]) -> np.ndarray:
    """`array` itself when it is 64-byte aligned and is not one of the buffers in `held`
    (its data pointers), else an aligned copy."""
    if array.size and array.ctypes.data % 64 == 0 and array.ctypes.data not in held:
        return array
    return _aligned_copy(array)


def _aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts on a 64-byte boundary."""
    if array.size == 0:
        return array.copy()
    out = _aligned_empty(array.shape, array.dtype)
    np.copyto(out, array)
    return out


def _aligned_empty(shape, dtype, align: int = 64) -> np.ndarray:
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def compile_graph(graph: Graph, target: Any = None, *, rules: bool | None = None,
                  options: BuildOptions | None = None, cache: bool = True) -> CompiledGraph:
    """Lower `graph` to Relax and build it as `build_executable` decides (opt_level 2 by
    default: the CPU rules on llvm targets unless `rules=False` or MEGTRACE_CPU_RULES=0,
    TVM's default pipeline elsewhere or when the rules fail). Graphs with 0-size values
    or ops Relax cannot express run on the NumPy interpreter. For this machine's CPU the
    build goes through the persistent compile cache (compile_cache.py) unless `cache`
    is False or MEGTRACE_COMPILE_CACHE=0."""
    tgt = resolve(target)
    if any(n.op.value_shaped for n in graph.nodes):
        # sizes follow each call's values: the interpreter computes the traced shape
        # arithmetic (F.full((y.shape[0], 1), 0) after y = x[mask]) at run time
        return InterpretedGraph(graph, tgt)
    graph = graph.without_shape_inputs()     # shape arithmetic never reaches kernels
    if has_empty_values(graph) or has_unlowered_ops(graph):
        return InterpretedGraph(graph, tgt)
    options = options or BuildOptions()

    def build() -> Built:
        return build_executable(graph, tgt, rules=rules, options=options)
    if cache:
        built = cached_build(graph, tgt, rules, options, build)
    else:
        built = build()
    return CompiledGraph(graph, built.target, built.executable, built.seconds,
                         list(built.rules), built.pipeline, list(built.kernels),
                         cached=built.cached, donates=options.donate)


def run_graph(graph: Graph, inputs: Sequence[np.ndarray], target: Any = None) -> list[np.ndarray]:
    return compile_graph(graph, target)(*inputs)
