"""`trace`: MegEngine's `megengine.jit.trace`, compiled with TVM.

The first call records the function into a Graph and an op tape (running it eagerly too,
unless `symbolic`); later calls replay the Python function against the tape and return
the TVM-compiled graph's results. `dump` writes the graph as a MegEngine FBS_V2 model.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import threading
from typing import Any, Callable

import numpy as np

from ..autodiff.tape import recording_tapes
from ..device import get_default_device, target_for
from .. import dispatch
from ..dispatch import recording
from ..dtype import name_of
from ..errors import TraceError
from ..gc_pause import collector_paused
from ..ir import Graph, Var
from ..tensor import Tensor
from . import overlap
from .configs import DTRConfig, GraphOptimizationConfig, SublinearMemoryConfig
from .dumping import dump_trace
from .entry import TraceEntry, materialize
from .exclude import exclude_from_trace  # noqa: F401  (megengine.jit.tracing.exclude_from_trace)
from .outputs import flatten_outputs, rebuild_outputs, shape_elements_as_tensors
from .recorder import TraceRecorder
from .replay import Replayer, _equal as array_comparator  # noqa: F401  (MegEngine's name)
from .sublinear import checkpoint_graph, plan_for_dtr
from .update_schedule import schedule_updates
from .tape_node import TapeNodeCall


def is_tracing() -> bool:
    """Whether code runs inside a traced function's call, recorded or replayed, and not
    inside `exclude_from_trace` (MegEngine's `jit.tracing.is_tracing`)."""
    return isinstance(dispatch.active_recorder(), (TraceRecorder, Replayer))



class trace:
    """Wrap a function so that later calls run a TVM-compiled graph of it.

    Works bare (`@trace`) and with options (`@trace(symbolic=True, capture_as_const=True)`),
    with MegEngine 1.13's parameters and meanings:

    - first call: records (running eagerly too unless `symbolic`); later calls re-run the
      Python function and check each op against the record (TraceError on a difference),
      then return the compiled graph's results. `without_host=True` skips Python on later
      calls: inputs go straight into the compiled graph (the fast path).
    - `capture_as_const`: outside tensors (module parameters) are frozen into the graph; a
      changed one raises "tensors not equals". Without it they stay graph inputs, read on
      every call.
    - `symbolic_shape=True`: a call with new input shapes records and compiles again for
      those shapes (a per-shape cache: Python sees real shapes, so shape arithmetic is
      always right; likewise new values of an argument whose value Python read, e.g. a
      repeat count given as a tensor, where MegEngine keeps shapes symbolic); False: a
      new shape raises TraceError.
    - `record_only`: records without computing; dump works, outputs have no value.
    - `opt_level`: 0 one unscheduled TVM kernel per op; 1 constant folding + TVM fusion;
      2 (default) + megtrace's CPU rules; 3 + MetaSchedule records from `tuning_dir`
      (or $MEGTRACE_TUNING_DIR); negative: the same level, first run checked against the
      NumPy interpreter.
    - `graph_opt_config`: jit_fuse_dimshuffle / jit_fuse_reduce allow or forbid fusing
      transposes and reductions into neighbouring kernels (None: opt_level decides).
    - `sublinear_memory_config` (SublinearMemoryConfig): gradient checkpointing of a traced
      training step; forward values the backward pass reads late are dropped and
      recomputed before it, as a search over block splits chose (jit/sublinear.py).
      `dtr_config` (DTRConfig): the same planner, aiming under its eviction_threshold
      (a compiled graph's memory is planned ahead; eager DTR is `megtrace.dtr`).
    - `profiling`: `get_profile()` gives per-kernel timings of the last compiled run.
    - `target` (megtrace's own): None for the inputs' device (this CPU), a preset name
      from `relay_bridge.PRESETS`, or a TVM target dict.
    """

    def __new__(cls, function: Callable | None = None, **kwargs):
        if function is None:
            return functools.partial(cls, **kwargs)
        return super().__new__(cls)

    def __init__(self, function: Callable, symbolic: bool = False,
                 capture_as_const: bool = False, record_only: bool = False,
                 sublinear_memory_config: SublinearMemoryConfig | None = None,
                 dtr_config: DTRConfig | None = None, profiling: bool = False,
                 opt_level: int = 2, graph_opt_config: GraphOptimizationConfig | None = None,
                 symbolic_shape: bool = True, without_host: bool = False, *,
                 target: Any = None, tuning_dir: str | None = None):
        _check_type("sublinear_memory_config", sublinear_memory_config, SublinearMemoryConfig)
        _check_type("dtr_config", dtr_config, DTRConfig)
        _check_type("graph_opt_config", graph_opt_config, GraphOptimizationConfig)
        if not isinstance(opt_level, int) or not -3 <= opt_level <= 3:
            raise ValueError(f"trace: opt_level must be an int in [-3, 3]; got {opt_level!r}")
        functools.update_wrapper(self, function)
        self.__wrapped__ = function
        self._symbolic = symbolic or record_only
        self._capture_as_const = capture_as_const or record_only
        self._record_only = record_only
        self.sublinear_memory_config = sublinear_memory_config
        self.dtr_config = dtr_config
        self._profiling = profiling
        self._profile = None
        self._opt_level = opt_level
        self._graph_opt_config = graph_opt_config
        self._symbolic_shape = symbolic_shape
        self._without_host = without_host
        self._target = target
        self._tuning_dir = tuning_dir
        self._checked = False
        self._entries: dict[Any, TraceEntry] = {}
        self._last_entry: TraceEntry | None = None
        self._tape_node: TapeNodeCall | None = None
        # Recording and building happen once per input signature even when several
        # threads call at once; replays and compiled runs then proceed in parallel.
        self._build_lock = threading.RLock()

    # -- calling ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not kwargs and recording_tapes():
            # inside `with gm:`: one tape node, its backward a second trace (tape_node.py)
            if self._tape_node is None:
                self._tape_node = TapeNodeCall(self.__wrapped__, self._plain_call,
                                               self._backward_trace,
                                               getattr(self, "__name__", "trace"))
            return self._tape_node(*args)
        return self._plain_call(*args, **kwargs)

    def _backward_trace(self, fn: Callable) -> "trace":
        """A trace of `fn` (a vector-Jacobian product of this function) built like this
        one; tensors it reads from outside are fed on every call."""
        return trace(fn, symbolic=self._symbolic, opt_level=self._opt_level,
                     graph_opt_config=self._graph_opt_config,
                     symbolic_shape=self._symbolic_shape, target=self._target,
                     tuning_dir=self._tuning_dir)

    def _plain_call(self, *args, **kwargs):
        bindings = self._tensor_args(args, kwargs)
        entry = self._lookup(bindings)
        if entry is None:
            with self._build_lock:
                entry = self._lookup(bindings)
                if entry is None:
                    return self._record(args, kwargs, bindings)
        self._last_entry = entry
        if self._record_only:
            raise TraceError("trace error because record_only: a record_only trace cannot be "
                             "run; use it to dump()")
        feeds = self._check_args(entry, bindings)
        if self._without_host:
            values = self._run_entry(entry, {**feeds, **_external_feeds(entry)})
            leaves = [values[v] if v in values else _source_value(entry, v, feeds)
                      for v in entry.out_vars]
            return rebuild_outputs(entry.out_tree, [Tensor._wrap(v) for v in leaves])
        # no collector passes while the step's temporaries are alive (gc_pause.py); the
        # collector comes back once _replay's frame, the Replayer with it, is gone
        with collector_paused():
            return self._replay(entry, args, kwargs, feeds, bindings)

    def _lookup(self, bindings) -> TraceEntry | None:
        if not self._entries:
            return None
        key = tuple((n, t.shape) for n, t in bindings)
        if self._symbolic_shape:
            named = dict(bindings)
            for (shapes, read_values), entry in list(self._entries.items()):
                if shapes == key and all(named[n].numpy().tobytes() == v
                                         for n, v in read_values):
                    return entry
            return None
        entry = next(iter(self._entries.values()))
        for (name, t), (_, var) in zip(bindings, entry.args):
            if t.shape != var.type.shape:
                raise TraceError.because(
                    "shape mismatch", f"shape mismatch: input {name} was traced with shape "
                    f"{var.type.shape}, got {t.shape} (symbolic_shape=False)")
        return entry

    @property
    def target(self) -> Any:
        """The TVM target the traced graph is built for: `target=` as given, else the
        one the first call's input device implies (None: this machine)."""
        if self._target is not None or not self._entries:
            return self._target
        return next(iter(self._entries.values())).target

    @property
    def graph(self) -> Graph:
        """The recorded graph (printable); available after the first call. With several
        traced input shapes (symbolic_shape), the first one's: what `dump` writes, and
        what `megtrace.export` and `megtrace.tune` build."""
        entry = next(iter(self._entries.values()), None)
        if entry is None:
            raise TraceError("trace: the function has not been called yet, so nothing is "
                             "recorded")
        return entry.graph

    def _tensor_args(self, args, kwargs) -> list[tuple[str, Tensor]]:
        named = []
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                named.append((f"arg_{i}", a))
            elif isinstance(a, (tuple, list)) and not self._capture_as_const:
                named.extend(_nested_tensors(a, f"arg_{i}"))
            elif self._capture_as_const:
                raise TraceError.with_detail(
                    "Only support tensor type args when capture_as_const is enabled",
                    f"argument {i} is {type(a).__name__}")
        for k in sorted(kwargs):
            if isinstance(kwargs[k], Tensor):
                named.append((f"kwarg_{k}", kwargs[k]))
        return named

    def _check_args(self, entry: TraceEntry, bindings) -> dict[Var, np.ndarray]:
        if [n for n, _ in bindings] != [n for n, _ in entry.args]:
            raise TraceError.because("inputs size mismatch",
                                     f"traced with {[n for n, _ in entry.args]}, called "
                                     f"with {[n for n, _ in bindings]}")
        feeds = {}
        for (name, t), (_, var) in zip(bindings, entry.args):
            if name_of(t.dtype) != var.type.dtype:
                raise TraceError.because(f"dtype mismatch: {var.type.dtype} vs {t.dtype.name}",
                                         f"input {name}")
            # its array itself, not numpy()'s copy: tensor values are never written in
            # place, and the VM only reads its inputs
            value = t._value
            feeds[var] = value if value is not None else t.numpy()
        return feeds

    def _record(self, args, kwargs, bindings):
        rec = TraceRecorder(symbolic=self._symbolic, capture_as_const=self._capture_as_const,
                            symbolic_shape=self._symbolic_shape)
        proxies = {name: _stand_in(rec.bind_input(t, name), t) for name, t in bindings}
        arg_vars = [(n, p._var) for n, p in proxies.items()]   # proxies may be materialized
        args = [_substitute(a, f"arg_{i}", proxies) for i, a in enumerate(args)]
        kwargs = {k: proxies.get(f"kwarg_{k}", v) for k, v in kwargs.items()}
        with recording(rec):
            result = shape_elements_as_tensors(self.__wrapped__(*args, **kwargs))
        leaves, tree = flatten_outputs(result)
        with recording(rec):
            out_vars = [rec.var_of(t) for t in leaves]
        assignments = rec.take_assignments()
        alive = rec.alive_results(leaves)
        entry = TraceEntry(rec.graph, rec.tape, rec.sources,
                           arg_vars, rec.externals,
                           out_vars, tree, rec.value_required,
                           assigned=[var for _, var in assignments],
                           undumpable=rec.undumpable,
                           value_reads=rec.value_reads)
        unknown = [v for v in entry.externals if entry.sources[v].kind in ("external", "fed")]
        if self._without_host and unknown:
            raise TraceError.with_detail(
                "have some unknown input tensors in trace result, maybe you can set "
                "`capture_as_const=True` when trace",
                "without_host runs only the compiled graph, which cannot read tensors from "
                "outside the function: " + ", ".join(v.name_hint for v in unknown))
        entry.simplify = abs(self._opt_level) >= 1
        devices = {t.device for _, t in bindings} or {get_default_device()}
        entry.target = target_for(sorted(devices)[0])
        entry.symbolic_shape = self._symbolic_shape
        entry.shape_tensors, entry.shape_values = rec.shape_tensors, rec.used_shape_values
        # Python read these arguments' values (a repeat count, a shape given as a tensor):
        # the trace holds for those values only, so other values trace again.
        read_values = tuple((n, rec._values[v].tobytes()) for n, v in arg_vars
                            if v in rec.read_args)
        self._entries[(tuple((n, t.shape) for n, t in bindings), read_values)] = entry
        self._last_entry = entry
        if self._record_only:
            return rebuild_outputs(tree, [Tensor._wrap(None) for _ in leaves])
        # Symbolic or not, the first call returns (and assigns) what the compiled graph
        # computes, as every later call does: MegEngine's eager and compiled kernels are
        # one and the same, so its traced calls agree bit for bit, while megtrace's NumPy
        # kernels (the eager run of a non-symbolic first call) may differ from TVM's by
        # an ulp (exp, log, ...).
        feeds = {v: rec._values[v] for _, v in entry.args}
        feeds.update(_external_feeds(entry, drawn=rec._values))
        results = self._run_entry(entry, feeds)
        values = [results[v] if v in results else _source_value(entry, v, feeds)
                  for v in out_vars]
        for t, var in assignments:
            materialize(t, results[var] if var in results else _source_value(entry, var,
                                                                              feeds))
        for t in alive:
            if t._owner is rec:
                materialize(t, results[t._var], fresh=True)
        return rebuild_outputs(tree, [Tensor._wrap(np.asarray(v)) for v in values])

    def _replay(self, entry: TraceEntry, args, kwargs, feeds, bindings):
        if entry.reads_since_build():   # Python read more values after the tracing call
            with self._build_lock:
                if entry.refresh_outputs():
                    entry.compiled = None       # build again, keeping those values too
        rep = Replayer(entry, self._run_entry, feeds)
        if not entry.externals and entry.compiled is not None and overlap.wanted():
            # every graph input is known now: run the graph while Python replays
            rep.pending = overlap.start(self._prepared_run(entry, feeds))
        given = dict(bindings)
        proxies = {name: _stand_in(rep.bind_input(var), given[name]) for name, var in entry.args}
        args = [_substitute(a, f"arg_{i}", proxies) for i, a in enumerate(args)]
        kwargs = {k: proxies.get(f"kwarg_{k}", v) for k, v in kwargs.items()}
        with recording(rep):
            result = shape_elements_as_tensors(self.__wrapped__(*args, **kwargs))
        leaves, tree = flatten_outputs(result)
        values = rep.finish(leaves)
        return rebuild_outputs(tree, [Tensor._wrap(np.asarray(v)) for v in values])

    def _run_entry(self, entry: TraceEntry, feeds: dict[Var, np.ndarray]) -> dict[Var, np.ndarray]:
        """Run the compiled graph (building it on first use); values by Var."""
        if entry.compiled is None:
            with self._build_lock:
                if entry.compiled is None:
                    # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
                    from megtrace.relay_bridge import compile_graph
                    graph = self._memory_plan(entry.exec_graph())
                    target = self._target if self._target is not None else entry.target
                    entry.compiled = (graph, compile_graph(graph, target,
                                                           options=self._run_options()))
        return self._prepared_run(entry, feeds)()

    def _prepared_run(self, entry: TraceEntry, feeds: dict[Var, np.ndarray]
                      ) -> Callable[[], dict[Var, np.ndarray]]:
        """The run of the built graph on `feeds`, as a function giving values by Var. A
        plain run hands its inputs to TVM here (CompiledGraph.prepare), so that called on
        another thread (overlap.py) it makes no TVM call before the VM's; a profiled or
        checked run does all its work when called."""
        graph, compiled = entry.compiled
        if not graph.outputs:
            return lambda: {}
        arrays = [feeds[v] for v in graph.inputs]
        if self._profiling or dispatch.profile_hook is not None or \
                (self._opt_level < 0 and not self._checked):
            run = functools.partial(self._observed_run, graph, compiled, arrays)
        elif hasattr(compiled, "prepare"):
            run = compiled.prepare(*arrays)
        else:                               # an InterpretedGraph
            run = functools.partial(compiled, *arrays)
        outputs = entry.exec_outputs
        return lambda: dict(zip(outputs, run()))

    def _observed_run(self, graph: Graph, compiled, arrays: list[np.ndarray]) -> list:
        """A run the profiler times (`profiling=True` or megtrace.utils.profiler), or the
        first one at opt_level < 0, checked against megtrace's NumPy interpreter."""
        prof = dispatch.profile_hook
        if self._profiling or prof is not None:
            # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
            from megtrace.relay_bridge.profile import profile_run
            start = prof.now() if prof is not None else 0.0
            values, report = profile_run(compiled, arrays)
            if self._profiling:
                self._profile = report
            if prof is not None:
                prof.graph_run(getattr(self.__wrapped__, "__name__", "trace"), start, report)
        else:
            values = compiled(*arrays)
        if self._opt_level < 0 and not self._checked:
            _check_against_interpreter(graph, arrays, values)
            self._checked = True
        return values

    def _memory_plan(self, graph: Graph) -> Graph:
        """The graph with the recomputation sublinear_memory_config or dtr_config asks
        for (sublinear.py), each update run right after its gradient
        (update_schedule.py); as it is without either."""
        if self.sublinear_memory_config is not None:
            return checkpoint_graph(schedule_updates(graph), self.sublinear_memory_config)
        if self.dtr_config is not None:
            return plan_for_dtr(schedule_updates(graph), self.dtr_config)
        return graph

    def _run_options(self):
        """The build options of the trace's own compiled run: with a memory option, new
        parameters and optimizer states are written over the inputs they replace
        (relay_bridge/donate.py; never in what dump, export or tune build)."""
        options = self._build_options()
        if self.sublinear_memory_config is None and self.dtr_config is None:
            return options
        return dataclasses.replace(options, donate=True)

    @property
    def build_options(self):
        """How compile_graph, export and tune build this trace (a relay_bridge
        BuildOptions from opt_level, graph_opt_config and tuning_dir)."""
        return self._build_options()

    def _build_options(self):
        """opt_level and graph_opt_config as a relay_bridge BuildOptions (see its doc):
        a negative level builds like its absolute value and checks the first compiled
        run against the NumPy interpreter, as MegEngine checks its optimized graph."""
        # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
        from megtrace.relay_bridge.build import BuildOptions
        level = abs(self._opt_level)
        cfg = self._graph_opt_config or GraphOptimizationConfig()

        def choose(flag):
            return level >= 1 if flag is None else bool(flag)
        return BuildOptions(level, choose(cfg.jit_fuse_dimshuffle), choose(cfg.jit_fuse_reduce),
                            self._tuning_dir or os.environ.get("MEGTRACE_TUNING_DIR"))

    def get_profile(self) -> dict:
        """Per-kernel timings of the last compiled run (see megtrace.relay_bridge.profile for the
        JSON shape). Empty records before the first compiled run; TraceError unless the
        trace was made with profiling=True."""
        if not self._profiling:
            raise TraceError("trace: get_profile() needs trace(..., profiling=True)")
        if self._profile is None:
            # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
            from megtrace.relay_bridge.profile import empty_profile
            return empty_profile()
        return self._profile

    # -- dumping ------------------------------------------------------------------------
    # MegEngine's trace.dump; the body lives in dumping.py (see its docstring).
    dump = dump_trace

    @property
    def output_vars(self) -> list:
        """The traced outputs as VarNodes, for `megtrace.dump_graph`."""
        from ..dump import VarNode
        if not self._entries:
            raise TraceError("trace: call the traced function once first")
        graph = next(iter(self._entries.values())).graph
        return [VarNode(graph, v, n) for v, n in zip(graph.outputs, graph.output_names)]


def _check_against_interpreter(graph: Graph, arrays, values) -> None:
    from ..errors import CompileError
    from ..interpreter import run
    want = run(graph, *arrays)
    for name, got, ref in zip(graph.output_names, values, want):
        ref64, got64 = np.asarray(ref, np.float64), np.asarray(got, np.float64)
        err = np.abs(got64 - ref64).max() / max(np.abs(ref64).max(), 1e-30) if ref.size else 0
        if not err <= 1e-3:
            raise CompileError(f"trace: the compiled graph disagrees with the reference "
                               f"interpreter on {name} (relative error {err:.3g})")


def _nested_tensors(seq, prefix: str) -> list[tuple[str, Tensor]]:
    """Tensors inside tuple/list arguments are inputs too (MegEngine flattens them):
    named by their path, `arg_1_0` for the first element of argument 1."""
    named = []
    for j, e in enumerate(seq):
        if isinstance(e, Tensor):
            named.append((f"{prefix}_{j}", e))
        elif isinstance(e, (tuple, list)):
            named.extend(_nested_tensors(e, f"{prefix}_{j}"))
    return named


def _substitute(a, prefix: str, proxies: dict[str, Tensor]):
    """Argument `a` with its tensors (nested in tuples/lists too) replaced by proxies."""
    if isinstance(a, Tensor):
        return proxies.get(prefix, a)
    if isinstance(a, (tuple, list)) and not isinstance(a, Tensor):
        items = [_substitute(e, f"{prefix}_{j}", proxies) for j, e in enumerate(a)]
        if type(a) in (tuple, list):
            return type(a)(items)
        return type(a)(*items) if hasattr(a, "_fields") else type(a)(items)
    return a


def _stand_in(proxy: Tensor, arg: Tensor) -> Tensor:
    """The traced tensor a function receives for argument `arg` is `arg` for autodiff (a
    GradManager that attached `arg` differentiates through it) and shares its Python
    attributes (`proxy.grad` is `arg.grad`), as MegEngine passes the argument itself."""
    if arg._ad is None:
        arg._ad = {}           # filled in place when a GradManager records
    proxy._ad = arg._ad
    proxy.__dict__ = arg.__dict__
    return proxy


def _check_type(name: str, value, cls) -> None:
    if value is not None and not isinstance(value, cls):
        raise TypeError(f"trace: {name} must be a {cls.__name__} or None; got "
                        f"{type(value).__name__}")


def _external_feeds(entry: TraceEntry, drawn: dict | None = None) -> dict[Var, np.ndarray]:
    """Outside values of a run without Python: external tensors as they are now, and a
    new key for each random op (`drawn`: the keys Python drew while tracing)."""
    feeds = {}
    for var in entry.externals:
        source = entry.sources[var]
        if drawn is not None and var in drawn:     # the value the trace read (rng: drew)
            feeds[var] = drawn[var]
            continue
        if source.kind == "rng":
            feeds[var] = source.stream.next_key()
            continue
        t = source.outside()
        if t is None:
            raise TraceError.because(f"external {var.name_hint} no longer exists")
        feeds[var] = t.numpy()
    return feeds


def _source_value(entry: TraceEntry, var: Var, feeds) -> np.ndarray:
    const = entry.const_value(var)
    return const if const is not None else feeds[var]
