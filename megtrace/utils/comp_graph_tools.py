"""`megtrace.utils.comp_graph_tools`: MegEngine 1.13's helpers over a model's graph.

They work on the nodes of `megtrace.utils.network` (VarNode/OpNode: what `Network`
shows); the output vars of a `load_graph` model (its `output_vars_list`) are accepted
and shown as such nodes. `GraphInference` runs a dumped model by input name.
"""
from __future__ import annotations

import collections
import heapq
from collections import OrderedDict
from typing import Callable, Dict, List, Tuple, Union

import numpy as np

from ..dtype import QuantParam
from ..dump import VarNode as _LoadedVar
from .network_graph import adopt, clone_with
from .network_node import OpNode, SharedDeviceTensor, VarNode

__all__ = ["get_dep_vars", "get_owner_opr_inputs", "get_owner_opr_type", "get_opr_type",
           "graph_traversal", "get_oprs_seq", "replace_vars", "replace_oprs",
           "set_priority_to_id", "find_vars_by_name", "embed_inputs", "GraphInference"]

_PROVIDERS = ("ImmutableTensor", "Host2DeviceCopy")


def _as_nodes(var) -> list[VarNode]:
    """VarNodes for a var or a list of them; a loaded model's output vars become nodes
    (one adoption per graph, so vars of one graph share their nodes)."""
    items = [var] if isinstance(var, (VarNode, _LoadedVar)) else list(var)
    adopted: dict[int, dict] = {}
    out = []
    for v in items:
        if isinstance(v, _LoadedVar):
            key = id(v.graph)
            if key not in adopted:
                nodes = adopt(v.graph)
                adopted[key] = {id(g): n for g, n in zip(v.graph.outputs, nodes)}
                adopted[key]["vars"] = {g: n for g, n in zip(v.graph.outputs, nodes)}
            found = adopted[key]["vars"].get(v.var)
            if found is None:
                raise ValueError(f"{v!r} is not an output of its loaded graph")
            out.append(found)
        elif isinstance(v, VarNode):
            out.append(v)
        else:
            raise TypeError(f"expected a VarNode, got {type(v).__name__}")
    return out


def get_dep_vars(var: Union[VarNode, List[VarNode]],
                 var_type: Union[str, List[str]] = None) -> List[VarNode]:
    """The vars `var` depends on (itself included), breadth first; only those whose
    owner is of type `var_type` when it is given."""
    if isinstance(var_type, str):
        var_type = [var_type]
    outputs, memo = [], set()
    queue = collections.deque(_as_nodes(var))
    while queue:
        v = queue.popleft()
        if id(v) in memo:
            continue
        memo.add(id(v))
        queue.extend(get_owner_opr_inputs(v))
        if var_type is None or get_owner_opr_type(v) in var_type:
            outputs.append(v)
    return outputs


def get_owner_opr_inputs(var: VarNode) -> List[VarNode]:
    """The inputs of the operator computing `var`."""
    return list(var.owner.inputs)


def get_owner_opr_type(var: VarNode) -> str:
    """The (C++) type of the operator computing `var`."""
    return var.owner.cxx_type


def get_opr_type(opr: OpNode) -> str:
    """The (C++) type of an operator: "ConvolutionForward", "Elemwise", ..."""
    assert isinstance(opr, OpNode)
    return opr.cxx_type


class _ReadyHeap:
    """Operators ready to run, smallest (priority, id) first."""

    def __init__(self, key: Callable):
        self._list: list = []
        self._key = key

    def add(self, opr: OpNode) -> None:
        heapq.heappush(self._list, self._key(opr) + (opr.id, id(opr), opr))

    def pop_min(self) -> OpNode:
        return heapq.heappop(self._list)[-1]

    def remove(self, item) -> None:
        raise KeyError(item)

    def __bool__(self) -> bool:
        return bool(self._list)


def graph_traversal(outputs):
    """(map_oprs, map_vars, var2oprs, opr2receivers, indegree2opr, opr2indegree) of the
    graph ending at `outputs`, as MegEngine returns them: operators and vars by id, for
    each var id the (operator id, input index) pairs reading it, for each operator id the
    ids of its readers, and the in-degrees get_oprs_seq sorts by."""
    outputs = _as_nodes(outputs)
    map_oprs, map_vars = collections.defaultdict(set), collections.defaultdict(set)
    var2oprs, opr2receivers = collections.defaultdict(list), collections.defaultdict(list)
    queue = []
    for o in (x.owner for x in outputs):
        if o not in queue:
            queue.append(o)
    visited = {o.id for o in queue}
    indegree2opr = collections.defaultdict(set)
    indegree2opr[0] = _ReadyHeap(lambda op: (op.priority,))
    opr2indegree = {}
    idx = 0
    while idx < len(queue):
        cur = queue[idx]
        idx += 1
        map_oprs[cur.id] = cur
        for var_idx, var in enumerate(cur.inputs):
            map_vars[var.id] = var
            var2oprs[var.id].append((cur.id, var_idx))
            pre = var.owner
            if pre.id not in visited:
                visited.add(pre.id)
                queue.append(pre)
            opr2receivers[pre.id].append(cur.id)
        indegree = len(cur.inputs)
        indegree2opr[indegree].add(cur if indegree == 0 else cur.id)
        opr2indegree[cur.id] = indegree
    return map_oprs, map_vars, var2oprs, opr2receivers, indegree2opr, opr2indegree


def get_oprs_seq(outputs, prune_reshape: bool = False,
                 prune_immtensor: bool = True) -> List[OpNode]:
    """The operators of the graph in an execution order (ties by priority, then id);
    parameters and inputs are placed just before their first reader.
    `prune_reshape` leaves out the oprs that only compute Reshape target shapes;
    `prune_immtensor` leaves out ImmutableTensor oprs."""
    outputs = _as_nodes(outputs)
    map_oprs, _, var2oprs, opr2receivers, indegree2opr, opr2indegree = graph_traversal(outputs)
    seq, remaining = [], len(map_oprs)
    while indegree2opr[0]:
        opr = indegree2opr[0].pop_min()
        remaining -= 1
        if opr.type != "ImmutableTensor" or not prune_immtensor:
            seq.append(opr)
        for post in opr2receivers[opr.id]:
            degree = opr2indegree[post]
            indegree2opr[degree].discard(post)
            degree -= 1
            if degree == 0:
                indegree2opr[0].add(map_oprs[post])
            else:
                indegree2opr[degree].add(post)
            opr2indegree[post] = degree
    assert remaining == 0, "there are {} remaining nodes; cyclic graph?".format(remaining)
    seq = _providers_near_readers(seq)
    if prune_reshape:
        seq = _prune_reshape(outputs, seq, var2oprs)
    return seq


def _providers_near_readers(oprs: List[OpNode]) -> List[OpNode]:
    providers = [o for o in oprs if o.type in _PROVIDERS]
    placed = {id(o) for o in providers}
    out = []
    for o in oprs:
        if o.type in _PROVIDERS:
            continue
        for inp in o.inputs:
            if id(inp.owner) in placed and inp.owner.type in _PROVIDERS:
                out.append(inp.owner)
                placed.discard(id(inp.owner))
        out.append(o)
    return out + [o for o in providers if id(o) in placed]


def _prune_reshape(outputs, seq: List[OpNode], var2oprs) -> List[OpNode]:
    """Leave out what only computes a Reshape's target shape (known when inferring)."""
    var2oprs = {k: list(v) for k, v in var2oprs.items()}
    marked, visited = set(), set()

    def prune(cur: OpNode, post: OpNode) -> None:
        useless = True
        for out in cur.outputs:
            if "workspace" in (out.name or ""):
                continue
            idx = next(i for i, x in enumerate(post.inputs) if x is out)
            pairs = var2oprs.get(out.id, [])
            if (post.id, idx) in pairs:
                pairs.remove((post.id, idx))
            useless = useless and not pairs
        if useless:
            marked.add(cur.id)
            for opr in {id(v.owner): v.owner for v in cur.inputs}.values():
                if (opr.id, cur.id) not in visited:
                    visited.add((opr.id, cur.id))
                    prune(opr, cur)

    for var in get_dep_vars(outputs, "Reshape"):
        reshape = var.owner
        if len(reshape.inputs) > 1:
            prune(reshape.inputs[1].owner, reshape)
    return [o for o in seq if o.id not in marked]


def replace_vars(dst: List[VarNode], varmap: Dict[VarNode, VarNode]) -> List[VarNode]:
    """New vars for `dst` where every dependency on a key of `varmap` reads its value
    instead (the operators on the way are copied; the old graph is unchanged)."""
    repl = {id(k): v for k, v in getattr(varmap, "items", lambda: varmap)()}
    return clone_with(_as_nodes(dst), lambda v: repl.get(id(v)))


def replace_oprs(dst: List[VarNode], oprmap: Dict[OpNode, OpNode]) -> List[VarNode]:
    """New vars for `dst` where the outputs of each key operator of `oprmap` come from
    its value operator instead (same number of outputs)."""
    repl = {}
    for old, new in getattr(oprmap, "items", lambda: oprmap)():
        assert isinstance(old, OpNode) and isinstance(new, OpNode)
        assert len(old.outputs) == len(new.outputs), \
            "can not replace {} with {}".format(old, new)
        repl[id(old)] = new

    def swap(v: VarNode):
        new = repl.get(id(v.owner))
        if new is None:
            return None
        idx = next(i for i, o in enumerate(v.owner.outputs) if o is v)
        return new.outputs[idx]
    return clone_with(_as_nodes(dst), swap)


def set_priority_to_id(dest_vars) -> None:
    """Give every operator `dest_vars` depend on its id as priority (MegEngine: before
    a dump); megtrace's nodes keep their creation order as priority already."""
    _as_nodes(dest_vars)


def find_vars_by_name(dst: List[VarNode], names: List[str]) -> List[VarNode]:
    """The vars of the graph ending at `dst` with these names, in the order of `names`."""
    dst = _as_nodes(dst)
    wanted = list(names)
    found = {}
    for v in get_dep_vars(dst) + dst:
        if v.name in wanted:
            found[v.name] = v
            wanted.remove(v.name)
    assert not wanted, "Can not find varnode {} in this model".format(wanted)
    return [found[n] for n in names]


def embed_inputs(dst: List[VarNode], data: List[np.ndarray],
                 inputs: List[VarNode] = None) -> Tuple[List[VarNode], Dict[str, VarNode]]:
    """New vars for `dst` with `inputs` (default: every Host2DeviceCopy) replaced by
    constants holding `data`; returns them and {input name: its constant}."""
    dst = _as_nodes(dst)
    if inputs is None:
        inputs = get_dep_vars(dst, "Host2DeviceCopy")
    assert len(data) == len(inputs)
    input_dict, repl = OrderedDict(), {}
    for inp, value in zip(inputs, data):
        const = SharedDeviceTensor(np.asarray(value), inp.name).outputs[0]
        const.name = inp.name
        input_dict[inp.name] = const
        repl[inp] = const
    new = replace_vars(dst, repl)
    for old, var in zip(dst, new):
        var.name = old.name
    return new, input_dict


class GraphInference:
    """Loads a serialized computing graph (a file object or a file name) to run it.

    `outputs` keeps only the outputs of these names (MegEngine compiles the subgraph
    ending there, whose inputs are only those these outputs depend on). `profiling` and
    `optimize_for_inference` are MegEngine's switches for its own graph compiler;
    megtrace compiles the graph with TVM either way.
    """

    def __init__(self, file, outputs: List[str] = None, profiling: bool = False,
                 optimize_for_inference: bool = False, **kwargs):
        from ..graph_io import load_graph
        self._model = load_graph(file)
        names = self._model.output_names
        if outputs is not None:
            missing = [n for n in outputs if n not in names]
            if missing:
                raise KeyError(f"GraphInference: no output named {missing}; the model's "
                               f"outputs are {names}")
            names = list(outputs)
        self._outputs = names
        self._inputs = self._model.input_names_by_dependency(names)
        if outputs is None:     # inputs no output reads (a value traced as a constant)
            self._inputs += [i.name for i in self._model.inputs if i.name not in self._inputs]

    def run(self, *inp_args: np.ndarray,
            inp_dict: Dict[str, np.ndarray] = None) -> Dict[str, np.ndarray]:
        """Outputs as {name: value}. Inputs by position and/or by name in `inp_dict`
        (recommended): positions follow MegEngine's order, breadth first from the outputs
        through the graph, which may differ from the traced function's arguments."""
        assert len(inp_args) <= len(self._inputs), \
            "This model expects {} inputs".format(len(self._inputs))
        inputs = dict(zip(self._inputs, inp_args))
        if inp_dict is not None:
            inputs.update(inp_dict)
        assert inputs.keys() == set(self._inputs), \
            "This model expects inputs {}, but gets inputs {}".format(
                list(self._inputs), list(inputs.keys()))
        feed = {k: self._as_input(k, v) for k, v in inputs.items()}
        for info in self._model.inputs:       # the chosen outputs do not read these
            if info.name not in feed:
                feed[info.name] = self._as_input(info.name, np.zeros(info.shape))
        values = self._model.run(**feed)
        return OrderedDict((name, values[name]) for name in self._outputs)

    def _as_input(self, name: str, value) -> np.ndarray:
        """MegEngine copies each input into the input var's dtype; a scalar goes into a
        1-element input (a dump holds 0-d values as shape (1,), as MegEngine's does)."""
        info = next(i for i in self._model.inputs if i.name == name)
        arr = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
        if arr.ndim == 0 and len(info.shape) == 1:
            arr = arr.reshape(1)
        dtype = info.dtype.np_dtype() if isinstance(info.dtype, QuantParam) else info.dtype
        return arr.astype(dtype, copy=False)
