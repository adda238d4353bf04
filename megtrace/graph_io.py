"""`load_graph`: run a MegEngine model file (ours or MegEngine's) with TVM.

The file is decoded once; a Graph is built and compiled per input signature, so a model
dumped at batch 1 also runs at batch 8 (its shape arithmetic is re-evaluated).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import (FormatError, MegtraceError, ShapeError, UnsupportedModelError,
                     UnsupportedOpError)
from .dtype import QuantParam
from .ir import Graph, TensorType
from .ops.random import KIND_OF, RNG_KEY_PREFIX
from .random.stream import OprKeys
from .tensor import Tensor


@dataclass(frozen=True)
class InputInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str


class LoadedGraph:
    """A loaded model: call it with arrays (positionally or by input name)."""

    def __init__(self, model, target: Any = None, testcases=None):
        self._model = model
        self._target = target
        self.testcases: list[dict[str, np.ndarray]] = list(testcases or [])
        self._cache: dict[tuple, Any] = {}
        self._build_lock = threading.Lock()     # one build per signature across threads
        self.inputs = [InputInfo(t.name, t.shape, t.dtype) for t in model.inputs]
        # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
        from megtrace.fbs.to_graph import value_shaped_oprs
        self.value_shaped_oprs = value_shaped_oprs(model)
        self.graph = self._graph_for({}) if not self.value_shaped_oprs else \
            self._bounded_graph()
        self.output_names = list(model.output_names())
        self.metadata = model.metadata
        self._rng = _opr_generators(self.graph)

    def input_names_by_dependency(self, outputs: list[str] | None = None) -> list[str]:
        """The names of the inputs `outputs` (default all) depend on, in the order
        MegEngine's GraphInference takes them positionally: breadth first from the
        outputs through the file's oprs."""
        ids = dict(zip(self.output_names, self._model.output_ids))
        return self._model.input_names_by_dependency(
            None if outputs is None else [ids[n] for n in outputs])

    def _bounded_graph(self) -> Graph | None:
        """A model with value-shaped oprs (CondTake) runs opr by opr on each call's values;
        its static graph, with those oprs' largest shapes, is only for inspection and
        exists when the shape arithmetic after them stays consistent at those shapes."""
        try:
            return self._graph_for({})
        except (FormatError, ShapeError):
            return None

    @property
    def target(self) -> Any:
        """The TVM target given to load_graph (None: this machine)."""
        return self._target

    def _graph_for(self, types: dict[str, TensorType]) -> Graph:
        """The graph for these input types. A failure with the file's own shapes is the
        file's fault (FormatError); once those work, a failure with the caller's shapes
        is the caller's (ShapeError naming the inputs)."""
        # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
        from megtrace.fbs.to_graph import build_graph
        try:
            graph = build_graph(self._model, types)
        except (FormatError, MemoryError):
            raise
        except UnsupportedOpError as e:
            raise UnsupportedModelError(str(e)) from e
        except (MegtraceError, ValueError, TypeError, KeyError, IndexError) as e:
            given = {n: t.shape for n, t in types.items()
                     if t.shape != self._file_shapes().get(n)}
            if given and hasattr(self, "graph"):
                raise ShapeError(
                    f"input shape(s) {given} do not fit the model (dumped for "
                    f"{self._file_shapes()}): {e}") from e
            raise FormatError(f"inconsistent model: {type(e).__name__}: {e}") from e
        _check_value_sizes(graph)
        return graph

    def named_graph(self, input_types: dict[str, TensorType] | None = None
                    ) -> tuple[Graph, dict]:
        """A fresh graph for these input types (default: the file's own), with the file's
        name of each var it names (what megtrace.utils.network shows; `graph` keeps op
        names only). Random oprs draw their first numbers there: their keys are
        constants, which the writer drops (the oprs draw their own, as in the file)."""
        # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
        from megtrace.fbs.to_graph import build_graph
        names: dict = {}
        return _first_keys_as_consts(build_graph(self._model, input_types or {}, names)), names

    def _file_shapes(self) -> dict[str, tuple[int, ...]]:
        return {i.name: tuple(i.shape) for i in self.inputs}

    def _feed(self, args, named) -> list[np.ndarray]:
        if len(args) > len(self.inputs):
            raise ValueError(f"load_graph model takes {len(self.inputs)} inputs "
                             f"{[i.name for i in self.inputs]}; got {len(args)}")
        feed = {i.name: a for i, a in zip(self.inputs, args)}
        for k, v in named.items():
            if k not in {i.name for i in self.inputs}:
                raise ValueError(f"unknown input {k!r}; inputs are {[i.name for i in self.inputs]}")
            if k in feed:
                raise ValueError(f"input {k!r} is given both by position and by name")
            feed[k] = v
        arrays = []
        for info in self.inputs:
            if info.name not in feed:
                raise ValueError(f"missing input {info.name!r}")
            value = feed[info.name]
            arr = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            want = info.dtype.np_dtype() if isinstance(info.dtype, QuantParam) else \
                np.dtype(info.dtype)
            if arr.dtype != want or _quant_of(arr.dtype) != _quant_of(want):
                raise ValueError(f"input {info.name!r}: expected dtype {info.dtype}, got "
                                 f"{arr.dtype}")
            if arr.ndim != len(info.shape):
                raise ShapeError(f"input {info.name!r}: expected a {len(info.shape)}-d array "
                                 f"like {info.shape}, got shape {arr.shape}")
            arrays.append(arr)
        return arrays

    def compiled_for(self, arrays: list[np.ndarray]):
        if self.value_shaped_oprs:
            return self._evaluate
        key = tuple(a.shape for a in arrays)
        compiled = self._cache.get(key)
        if compiled is None:
            with self._build_lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
                    from megtrace.relay_bridge import compile_graph
                    types = {i.name: TensorType(a.shape, i.dtype)
                             for i, a in zip(self.inputs, arrays)}
                    compiled = compile_graph(self._graph_for(types), self._target)
                    self._cache[key] = compiled
        return compiled

    def _evaluate(self, *arrays: np.ndarray) -> list[np.ndarray]:
        # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
        from megtrace.fbs.to_graph import evaluate_model
        values = {i.name: a for i, a in zip(self.inputs, arrays)}
        try:
            return evaluate_model(self._model, values, _value_bytes_limit())
        except (FormatError, MemoryError, UnsupportedModelError):
            raise
        except UnsupportedOpError as e:
            raise UnsupportedModelError(str(e)) from e
        except (MegtraceError, ValueError, TypeError, KeyError, IndexError) as e:
            raise ShapeError(f"the model (shapes depending on values: "
                             f"{', '.join(self.value_shaped_oprs)}) cannot run on inputs "
                             f"{ {n: a.shape for n, a in values.items()} }: {e}") from e

    def run(self, *args, **named) -> dict[str, np.ndarray]:
        """Outputs by name, as NumPy arrays."""
        arrays = self._feed(args, named)
        values = self.compiled_for(arrays)(*arrays, *self._next_keys())
        return dict(zip(self.output_names, values))

    def _next_keys(self) -> list[np.ndarray]:
        """One key per random opr, from its own generator: this model's run number."""
        return [keys.next_key() for keys in self._rng]

    def __call__(self, *args, **named):
        """One output -> a Tensor; several -> a list of Tensors."""
        values = list(self.run(*args, **named).values())
        out = [Tensor._wrap(v) for v in values]
        return out[0] if len(out) == 1 else out

    def run_testcases(self) -> list[dict[str, float]]:
        """Run every embedded testcase with TVM and check its AssertEqual outputs; returns,
        per testcase, the error of each check. AssertionError when one exceeds maxerr."""
        report = []
        checkers: dict[tuple, tuple] = {}      # one compiled check per input signature
        for i, case in enumerate(self.testcases):
            arrays = self._feed((), case)
            key = tuple(a.shape for a in arrays)
            if key not in checkers:
                checkers[key] = self._checker_for(arrays)
            checks, compiled = checkers[key]
            values = compiled(*arrays, *self._next_keys())
            result = {}
            for (name, maxerr), err in zip(checks, values if checks else []):
                value = float(np.max(err))
                if not 0 <= value <= maxerr:
                    raise AssertionError(f"testcase {i}: {name}: error {value:.3g} exceeds "
                                         f"maxerr {maxerr:g}")
                result[name] = value
            report.append(result)
        return report

    def _checker_for(self, arrays: list[np.ndarray]):
        """([(check name, maxerr)], compiled graph of their error inputs); a model without
        AssertEqual gets its own compiled graph (it must at least run)."""
        # lazy: relay_bridge is the TVM layer, loaded on first build (not a cycle)
        from megtrace.relay_bridge import compile_graph
        from .ops import get
        if self.value_shaped_oprs:
            raise UnsupportedModelError(
                "run_testcases: the model's shapes depend on its values "
                f"({', '.join(self.value_shaped_oprs)}); its testcases' checks are not run")
        types = {info.name: TensorType(a.shape, info.dtype) for info, a in zip(self.inputs, arrays)}
        graph = self._graph_for(types)
        nodes = [n for n in graph.nodes if n.op is get("assert_equal")]
        if not nodes:
            return [], self.compiled_for(arrays)
        out_name = dict(zip(graph.outputs, graph.output_names))
        checks = [(out_name.get(n.outputs[0], n.outputs[0].name_hint), n.kwargs["maxerr"])
                  for n in nodes]
        errors = graph.with_outputs([n.inputs[2] for n in nodes],
                                    [f"err{j}" for j in range(len(nodes))])
        return checks, compile_graph(errors, self._target)

    # -- MegEngine's CompGraphLoadResult(graph, output_vars_dict, output_vars_list, metadata)
    @property
    def output_vars_list(self) -> list:
        from .dump import VarNode
        if self.graph is None:
            raise UnsupportedModelError(
                "the model's shapes depend on its values "
                f"({', '.join(self.value_shaped_oprs)}) and its output vars have no static "
                "shape; run it to get its outputs")
        return [VarNode(self.graph, v, n) for v, n in zip(self.graph.outputs, self.output_names)]

    @property
    def output_vars_dict(self) -> dict:
        return {v.name: v for v in self.output_vars_list}

    def __iter__(self):
        """Unpacks like MegEngine's load result: the model (in place of its computing
        graph), output vars by name, output vars in order, metadata."""
        return iter((self, self.output_vars_dict, self.output_vars_list, self.metadata))

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {TensorType(i.shape, i.dtype)}" for i in self.inputs)
        return f"LoadedGraph(inputs=[{ins}], outputs={self.output_names})"

    # In Jupyter a loaded model shows as its graph's drawing (see megtrace.graph_view).
    def _repr_svg_(self) -> str | None:
        return None if self.graph is None else self.graph._repr_svg_()

    def _repr_html_(self) -> str | None:
        return None if self.graph is None else self.graph._repr_html_()


def _opr_generators(graph: Graph | None) -> list[OprKeys]:
    """MegEngine gives each random opr of a loaded model a generator of its own, fresh
    from the opr's seed: one OprKeys per key input (ops/random.py), in input order."""
    if graph is None:
        return []
    users = {n.inputs[0]: n for n in graph.nodes if n.op.name in KIND_OF}
    return [OprKeys(users[v].kwargs["seed"], KIND_OF[users[v].op.name]) if v in users
            else OprKeys(0, "uniform")        # the opr's result is unused
            for v, name in zip(graph.inputs, graph.input_names)
            if name.startswith(RNG_KEY_PREFIX)]


def _first_keys_as_consts(graph: Graph) -> Graph:
    """`graph` with each random opr's key input made the constant of its first draw."""
    keys = dict(zip([v for v, n in zip(graph.inputs, graph.input_names)
                     if n.startswith(RNG_KEY_PREFIX)], _opr_generators(graph)))
    if not keys:
        return graph
    kept = [(v, n) for v, n in zip(graph.inputs, graph.input_names) if v not in keys]
    g = Graph([v for v, _ in kept], {**graph.consts, **{v: k.first() for v, k in keys.items()}},
              list(graph.nodes), [], [n for _, n in kept])
    g.set_outputs(graph.outputs, graph.output_names)
    return g


def _quant_of(dtype: np.dtype):
    """A quantized dtype's name and parameters, the scale as the file's float32 holds it
    (NumPy compares dtypes without their metadata)."""
    meta = (dtype.metadata or {}).get("mgb_dtype")
    if meta is None:
        return None
    return (meta.get("name"), np.float32(meta.get("scale", 0.0)), meta.get("zero_point", 0))


# The largest value a loaded model may compute: a file of a few bytes can ask for a
# broadcast to any shape, and must be refused before anything is allocated or compiled.
MAX_VALUE_BYTES_DEFAULT = 1 << 30


def _value_bytes_limit() -> int:
    return int(os.environ.get("MEGTRACE_MAX_VALUE_BYTES", MAX_VALUE_BYTES_DEFAULT))


def _check_value_sizes(graph: Graph) -> None:
    # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
    from megtrace.fbs.to_graph import check_value_size
    limit = _value_bytes_limit()
    for node in graph.nodes:
        for var in node.outputs:
            check_value_size(node.op.name, var.type, limit)


def load_graph(path_or_file, target: Any = None) -> LoadedGraph:
    """Load a MegEngine FBS_V2 model file and return a runnable, TVM-compiled model."""
    # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
    from megtrace.fbs.reader import detect_format, read_model
    if hasattr(path_or_file, "read"):
        data = path_or_file.read()
    else:
        path = os.fspath(path_or_file)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"load_graph: no such file {path!r}")
        with open(path, "rb") as f:
            data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise FormatError("load_graph: the file object must be opened in binary mode")
    if detect_format(data) == "mgbtest0":
        # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
        from megtrace.fbs.testcases import read_container
        model, cases = read_container(bytes(data))
        return LoadedGraph(model, target, cases)
    return LoadedGraph(read_model(data), target)
