"""`dump_graph`: MegEngine's `megbrain_graph.dump_graph` for megtrace graphs.

Output variables come from `trace.output_vars` or from a loaded model's
`output_vars_list`/`output_vars_dict`, as they come from `trace`/`load_graph` in MegEngine.
"""
from __future__ import annotations

import io
import json
import os
from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Sequence

from . import atomic_io
from .ir import Graph, Var

CompGraphDumpResult = namedtuple(
    "CompGraphDumpResult",
    ["nr_opr", "tot_bytes", "tensor_value_bytes", "content_hash", "inputs", "outputs", "params"])


@dataclass
class Metadata:
    """MegEngine's serialization Metadata; `user_info` is stored as given bytes (pickle)."""

    is_valid: bool = False
    graph_modified: bool = False
    user_info: bytes | None = None
    optimize_options: int = 0

    @property
    def optimized_for_inference(self) -> bool:
        return bool(self.optimize_options)


class VarNode:
    """A value of a graph that can be dumped: what `dump_graph` takes."""

    def __init__(self, graph: Graph, var: Var, name: str):
        self.graph, self.var, self.name = graph, var, name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.var.type.shape

    @property
    def dtype(self):
        import numpy as np
        return np.dtype(self.var.type.dtype)

    @property
    def owner(self) -> "OpNode":
        """The operator computing this value (MegEngine's VarNode.owner)."""
        return OpNode(self.graph, self.var)

    def __repr__(self) -> str:
        return f"VarNode({self.name!r}, {self.var.type})"


class OpNode:
    """The operator behind a VarNode (MegEngine's OpNode): its inputs and outputs as
    VarNodes; a graph input's owner is MegEngine's Host2DeviceCopy, a constant's its
    ImmutableTensor (neither has inputs)."""

    def __init__(self, graph: Graph, var: Var):
        self.graph = graph
        self.node = graph.producers().get(var)
        self._var = var

    @property
    def type(self) -> str:
        if self.node is not None:
            return self.node.op.name
        return "ImmutableTensor" if self._var in self.graph.consts else "Host2DeviceCopy"

    @property
    def cxx_type(self) -> str:
        """MegEngine's C++ operator type, what comp_graph_tools reports ("ImmutableTensor",
        "Elemwise", "ConvolutionForward"): the opr the writer writes this op as."""
        if self.node is None:
            return self.type
        # lazy: the .mge writer loads flatbuffers (`import megtrace` stays light)
        from .utils.network_node import cxx_type_of
        return cxx_type_of(self.node.op, self.node.kwargs, [v.type for v in self.node.inputs])

    @property
    def inputs(self) -> list[VarNode]:
        vars_ = self.node.inputs if self.node is not None else ()
        return [VarNode(self.graph, v, v.name_hint) for v in vars_]

    @property
    def outputs(self) -> list[VarNode]:
        vars_ = self.node.outputs if self.node is not None else (self._var,)
        return [VarNode(self.graph, v, v.name_hint) for v in vars_]

    def __repr__(self) -> str:
        return f"OpNode({self.type!r})"


_FORMATS = (None, "FBS_V2", "FBS")


def dump_graph(output_vars, *, keep_var_name: int = 1, keep_opr_name: bool = False,
               keep_param_name: bool = False, keep_opr_priority: bool = False,
               no_change_graph: bool = False, strip_info_file=None, append_json: bool = False,
               metadata: Metadata | None = None, dump_format: str | None = None,
               model_version: int = 2, compat_older_version: str | None = None,
               input_names: Sequence[str] | None = None) -> tuple[bytes, CompGraphDumpResult]:
    """Serialize the graph computing `output_vars` (a list of VarNode, or a dict name ->
    VarNode that renames them). `keep_param_name` has no effect on megtrace graphs, whose
    weights are all ImmutableTensor (as in MegEngine's trace dumps)."""
    graph, vars_, names = _collect(output_vars)
    if dump_format not in _FORMATS:
        raise KeyError(f"dump_format {dump_format!r}; expected one of {_FORMATS}")
    if compat_older_version is not None:
        if str(compat_older_version).strip() != "8.14":
            raise ValueError(f"compat_older_version: only '8.14' is supported, got "
                             f"{compat_older_version!r}")
        if no_change_graph or dump_format != "FBS":
            raise ValueError("compat_older_version='8.14' requires no_change_graph=False and "
                             "dump_format='FBS'")
    if model_version not in (1, 2, 3):
        raise ValueError(f"model_version must be 1, 2 or 3; got {model_version!r}")
    # lazy: the .mge reader/writer loads flatbuffers (`import megtrace` stays light)
    from megtrace.fbs.writer import DumpOptions, dump_graph as write
    dumped = graph.with_outputs(vars_, names)
    in_names = list(input_names) if input_names is not None else list(graph.input_names)
    meta = metadata or Metadata()
    options = DumpOptions(keep_var_name=int(keep_var_name), keep_opr_name=bool(keep_opr_name),
                          keep_opr_priority=bool(keep_opr_priority),
                          no_change_graph=bool(no_change_graph), model_version=model_version,
                          enable_metadata=meta.is_valid, graph_modified=meta.graph_modified,
                          optimize_options=meta.optimize_options,
                          user_info_bytes=meta.user_info if meta.user_info is not None
                          else b"\x80\x04N.", format=dump_format or "FBS_V2",
                          compat_8_14=compat_older_version is not None)
    data, res = write(dumped, in_names, names, options)
    result = CompGraphDumpResult(res.nr_opr, res.tot_bytes, res.tensor_value_bytes,
                                 res.content_hash, res.inputs, res.outputs, [])
    if strip_info_file is not None:
        write_strip_info(strip_info_file, res.strip_info, append_json, res.content_hash)
    return data, result


def _collect(output_vars) -> tuple[Graph, list[Var], list[str]]:
    items = list(output_vars.items()) if isinstance(output_vars, dict) else \
        [(None, v) for v in (output_vars if isinstance(output_vars, (list, tuple))
                             else [output_vars])]
    if not items:
        raise ValueError("dump_graph: no output vars given")
    for _, v in items:
        if not isinstance(v, VarNode):
            raise TypeError(f"dump_graph: expected VarNode outputs (from trace.output_vars or "
                            f"a loaded model), got {type(v).__name__}")
    graphs = {id(v.graph) for _, v in items}
    if len(graphs) != 1:
        raise ValueError("dump_graph: output vars come from different graphs")
    vars_ = [v.var for _, v in items]
    if len(set(vars_)) != len(vars_):
        raise ValueError("dump_graph: an output var is given twice")
    names = [name if name is not None else v.name for name, v in items]
    return items[0][1].graph, vars_, names


def write_strip_info(target, info: dict, append: bool, content_hash: int) -> None:
    """MegEngine's strip-info JSON: dtypes, elemwise_modes, opr_types, hash."""
    if isinstance(target, (str, os.PathLike)):
        path = os.fspath(target)
        old = open(path).read() if os.path.exists(path) else ""
        merged = _merge(old, info, append)
        merged["hash"] = content_hash
        atomic_io.write_text(path, json.dumps(merged))
        return
    if not isinstance(target, io.TextIOBase) and not hasattr(target, "read"):
        raise TypeError("strip_info_file must be a path or a text file object")
    old = target.read()
    merged = _merge(old, info, append)
    merged["hash"] = content_hash
    target.seek(0)
    target.truncate()
    json.dump(merged, target)


def _merge(old_text: str, info: dict, append: bool) -> dict[str, Any]:
    if not (append and old_text.strip()):
        return dict(info)
    try:
        old = json.loads(old_text)
    except ValueError as e:
        raise ValueError(f"strip_info_file: the existing file is not JSON ({e}); append_json "
                         "needs a strip-info file written by dump") from None
    if not isinstance(old, dict) or not all(isinstance(v, (list, int, str)) for v in old.values()):
        raise ValueError("strip_info_file: the existing file is not MegEngine strip-info JSON "
                         "(an object of lists); append_json needs one written by dump")
    for key in old:
        for value in info.get(key, []) if isinstance(old[key], list) else []:
            if value not in old[key]:
                old[key].append(value)
    return old
