"""`megtrace.utils.network`: MegEngine 1.13's `Network`, an editor of dumped models.

`Network.load` reads a model with megtrace's reader into its IR graph and shows it as
OpNodes/VarNodes (megtrace.utils.network_node); edits rewire those nodes, functional
ops on VarNodes add new ones, and `dump` turns the nodes back into an IR graph written
by the same writer (and the same optimize_for_inference) as `trace.dump`.
"""
from __future__ import annotations

import collections.abc
import fnmatch
import io
import re
from typing import Any, Callable, Dict, Iterable, List, Sequence

from ..dump import Metadata, dump_graph
from ..dump import VarNode as DumpVar
from ..errors import MegtraceError, UnsupportedModelError
from ..graph_io import load_graph
from ..jit.dumping import _OPTIMIZE_FLAGS, _optimized, _write_atomic
from ..logger import get_logger
from ..serialization import dumps, load
from . import network_node as N
from .comp_graph_tools import get_dep_vars, get_oprs_seq
from .network_graph import adopt, refold, retype, to_graph
from .network_node import (Host2DeviceCopy, ImmutableTensor, OpNode, VarNode,
                           set_symbolic_shape)

__all__ = ["Network", "NodeFilter", "as_oprnode", "as_varnode", "set_symbolic_shape"]

logger = get_logger(__name__)


class Network:
    """A loaded model as editable nodes; `dump` writes it back as a .mge file."""

    def __init__(self):
        self.input_vars: list[VarNode] = []
        self.output_vars: list[VarNode] = []
        self.all_oprs_map: dict[int, OpNode] = collections.OrderedDict()
        self.all_vars_map: dict[int, VarNode] = collections.OrderedDict()
        self.graph = None
        self._metadata = None
        self._file = None          # (LoadedGraph, its graph as adopted, var -> VarNode)

    # -- loading -----------------------------------------------------------------------
    @classmethod
    def load(cls, model_path, outspec: List[str] = None) -> "Network":
        """Load a model file (a path or a binary file object); `outspec` keeps only the
        subgraph ending at the vars of these names."""
        loaded = load_graph(model_path)
        if loaded.graph is None:
            raise UnsupportedModelError(
                "Network.load: the model's shapes depend on its values "
                f"({', '.join(loaded.value_shaped_oprs)}) in a way megtrace cannot show as a "
                "static graph")
        self = cls()
        self._metadata = loaded.metadata
        graph, names = loaded.named_graph()
        nodes: dict = {}
        outputs = adopt(graph, names, nodes)
        self._file = (loaded, graph, nodes)
        if outspec is not None:
            by_name = {}
            for v in get_dep_vars(outputs):
                by_name.setdefault(v.name, v)
            missing = [n for n in outspec if n not in by_name]
            assert not missing, "Can not find {} in this model".format(missing)
            outputs = [by_name[n] for n in outspec]
        self.output_vars = list(outputs)
        self._compile()
        return self

    @property
    def metadata(self) -> dict | None:
        """The file's metadata as MegEngine's dict (None when it has none)."""
        meta = self._metadata
        if meta is None or not meta.is_valid:
            logger.info("metadata is not valid!")
            return None
        try:       # megtrace's safe unpickler: plain data, tensors, imported classes
            user_info = load(io.BytesIO(meta.user_info_bytes)) if meta.user_info_bytes \
                else None
        except Exception:  # noqa: BLE001  (MegEngine: any unpickling failure)
            logger.warning("can't parse user info by pickle, so return the original bytes "
                           "object!")
            user_info = meta.user_info_bytes
        ret = {"user_info": user_info, "graph_modified": bool(meta.graph_modified),
               "optimized_for_inference": bool(meta.optimize_options)}
        if meta.optimize_options:
            ret.update(deserialize_infer_option(meta.optimize_options))
        return ret

    # -- building ------------------------------------------------------------------------
    def make_const(self, data, name: str | None = None, device=None) -> VarNode:
        """An ImmutableTensor node providing `data` (a parameter)."""
        return ImmutableTensor(data, name, device).outputs[0]

    def make_input_node(self, shape, dtype, name: str | None = None, device=None) -> VarNode:
        """A Host2DeviceCopy node: a new input of the network."""
        return Host2DeviceCopy(shape, dtype, name, device).outputs[0]

    def add_output(self, *vars: VarNode) -> None:
        """Add vars to the outputs (each once)."""
        self.add_dep_oprs(*vars)
        for var in vars:
            if not any(var is o for o in self.output_vars):
                self.output_vars.append(var)
        self._compile()

    def remove_output(self, *vars: VarNode) -> None:
        for var in vars:
            kept = [o for o in self.output_vars if o is not var]
            if len(kept) == len(self.output_vars):
                logger.warning("Failed to remove {}({}). Please check whether this node is "
                               "in the output list.".format(var.name, id(var)))
            self.output_vars = kept
        self._compile()

    def add_dep_oprs(self, *vars: VarNode) -> list[VarNode]:
        """MegEngine attaches the oprs `vars` depend on to the network; megtrace's nodes
        are attached when they are made, so this only checks and returns the vars."""
        vars = vars or tuple(self.output_vars)
        assert all(isinstance(v, VarNode) for v in vars), "Only support add VarNode"
        return list(vars)

    # -- editing -------------------------------------------------------------------------
    def modify_opr_names(self, modifier) -> None:
        """Prefix every operator name with a string ("prefix.name"), or map it with a
        function (in place)."""
        if isinstance(modifier, str):
            prefix = modifier
            modifier = lambda v: "{}.{}".format(prefix, v)  # noqa: E731
        assert isinstance(modifier, collections.abc.Callable)
        for opr in self.all_oprs:
            new = modifier(opr.name)
            assert isinstance(new, str)
            opr.name = new
            if isinstance(opr, Host2DeviceCopy):
                opr.outputs[0].name = new

    def reset_batch_size(self, batchsize: int, *, blacklist=()) -> None:
        """Set the first dimension of every data provider not in `blacklist` to
        `batchsize` (they must agree on it) and re-infer the shapes after them."""
        blacklist = set(blacklist)
        prev = None
        for opr in self.data_providers_filter:
            if opr.name in blacklist:
                blacklist.remove(opr.name)
                continue
            shape = list(opr.shape)
            if prev is None:
                prev = shape[0]
            else:
                assert prev == shape[0], "batchsize mismatch: batchsize={} shape={} dp={}" \
                    .format(prev, shape, opr.name)
            shape[0] = batchsize
            opr.shape = tuple(shape)
        self._refold()
        self._compile()
        assert prev is not None, "no data provider found"
        assert not blacklist, "unused items in blacklist: {}".format(blacklist)

    def replace_vars(self, repl_dict: Dict[VarNode, VarNode]) -> None:
        """Make every operator reading a key var read its value var instead."""
        repl = {id(k): v for k, v in repl_dict.items() if k is not v}
        for opr in self.all_oprs:
            if any(id(i) in repl for i in opr.inputs):
                for i in opr.inputs:
                    if id(i) in repl and opr in i.users:
                        i.users.remove(opr)
                opr.inputs = [repl.get(id(i), i) for i in opr.inputs]
                for i in opr.inputs:
                    if opr not in i.users:
                        i.users.append(opr)
        self._compile()

    def replace_oprs(self, repl_dict: Dict[OpNode, OpNode]) -> None:
        """Let each value operator compute the outputs of its key operator (same number
        of outputs): the vars stay, their owner changes."""
        for old, new in repl_dict.items():
            assert len(old.outputs) == len(new.outputs), \
                "can not replace {} with {}".format(type(old), type(new))
            for ind, var in enumerate(old.outputs):
                var.owner = new
                var._var = new.outputs[ind]._var
            new.outputs = old.outputs
        self._compile()

    # -- queries -------------------------------------------------------------------------
    def get_opr_by_type(self, oprcls, unique: bool = True):
        assert issubclass(oprcls, OpNode)
        rst = self.opr_filter.type(oprcls).as_list()
        if unique:
            assert len(rst) == 1, "{} operators of type {} found".format(len(rst), oprcls)
            (rst,) = rst
        return rst

    def get_opr_by_name(self, name: str, unique: bool = True):
        rst = self.opr_filter.name(name).as_list()
        if unique:
            assert len(rst) == 1, "{} operators of type {} found".format(len(rst), name)
            (rst,) = rst
        return rst

    def get_var_by_name(self, name: str, unique: bool = True):
        rst = self.var_filter.name(name).as_list()
        if unique:
            assert len(rst) == 1, "{} operators of type {} found".format(len(rst), name)
            (rst,) = rst
        return rst

    def get_var_receive_oprs(self, var: VarNode) -> list[OpNode]:
        """The operators that read `var`."""
        return self.opr_filter.has_input(var).as_list()

    def get_dep_oprs(self, var) -> list[OpNode]:
        """The operators `var` depends on, in execution order."""
        return get_oprs_seq(var, False, False)

    @property
    def opr_filter(self) -> "NodeFilter":
        return NodeFilter(iter(self.all_oprs))

    @property
    def var_filter(self) -> "NodeFilter":
        return NodeFilter(iter(self.all_vars))

    @property
    def params_filter(self) -> "NodeFilter":
        """The parameters (ImmutableTensor operators)."""
        return self.opr_filter.param_provider()

    @property
    def data_providers_filter(self) -> "NodeFilter":
        """The inputs (Host2DeviceCopy operators)."""
        return self.opr_filter.data_provider()

    @property
    def dest_vars(self) -> list[VarNode]:
        return self.output_vars

    @property
    def all_oprs(self) -> list[OpNode]:
        return get_oprs_seq(self.output_vars, False, False)

    @property
    def all_vars(self) -> list[VarNode]:
        return get_dep_vars(self.output_vars)

    @property
    def all_vars_dict(self) -> dict:
        return self.var_filter.as_dict()

    @property
    def all_oprs_dict(self) -> dict:
        return self.opr_filter.as_dict()

    # -- writing -------------------------------------------------------------------------
    def optimize_for_inference(self, dest_vars, **kwargs) -> list[VarNode]:
        """The vars of `dest_vars` after megtrace's optimize_for_inference (as
        `trace.dump` runs it), as new nodes."""
        dest = list(dest_vars) if isinstance(dest_vars, Sequence) else [dest_vars]
        graph = to_graph(dest, [v.name for v in dest])
        optimized, _ = _optimized(graph, kwargs)
        return adopt(optimized)

    def dump(self, file, *, keep_var_name: int = 1, keep_opr_name: bool = False,
             keep_param_name: bool = False, keep_opr_priority: bool = False,
             strip_info_file=None, append_json: bool = False,
             optimize_for_inference: bool = True, append: bool = False,
             user_info: Any = None, enable_metadata: bool = True, **kwargs):
        """Write the network as a .mge file (MegEngine's options; see `trace.dump`); the
        metadata says graph_modified=True. Returns MegEngine's CompGraphDumpResult."""
        if kwargs.pop("arg_names", False):
            logger.warning('"arg_names" is not supported in Network.dump, rename input vars '
                           'directly')
        if kwargs.pop("output_names", False):
            logger.warning('"output_names" is not supported in Network.dump, rename output '
                           'vars directly')
        unknown = sorted(set(kwargs) - set(_OPTIMIZE_FLAGS))
        if unknown:
            raise ValueError(f"unknown options: {unknown}")
        if not self.output_vars:
            raise ValueError("Network.dump: the network has no output vars")
        names = [v.name for v in self.output_vars]
        graph = to_graph(self.output_vars, names)
        options = 0
        if optimize_for_inference:
            graph, options = _optimized(graph, kwargs)
        meta = Metadata(is_valid=bool(enable_metadata), graph_modified=True,
                        user_info=dumps(user_info) if enable_metadata else None,
                        optimize_options=options if enable_metadata else 0)
        outs = {n: DumpVar(graph, v, n) for n, v in zip(graph.output_names, graph.outputs)}
        if len(outs) != len(graph.outputs):
            raise ValueError(f"Network.dump: output var names must be unique; got {names}")
        data, result = dump_graph(outs, keep_var_name=keep_var_name,
                                  keep_opr_name=keep_opr_name, keep_param_name=keep_param_name,
                                  keep_opr_priority=keep_opr_priority,
                                  strip_info_file=strip_info_file, append_json=append_json,
                                  metadata=meta, input_names=graph.input_names)
        _write_atomic(file, data, append)
        return result

    def _refold(self) -> None:
        """After input shapes changed: build the file's graph again for them and carry
        over what megtrace folded at load (shape arithmetic: a flatten's Reshape target),
        as MegEngine re-infers it; nothing when the file cannot be built so (the shapes
        are then re-inferred by the ops' rules alone)."""
        if self._file is None:
            return
        loaded, graph, nodes = self._file
        types = {}
        for var, name in zip(graph.inputs, graph.input_names):
            node = nodes.get(var)
            types[name] = node._var.type if node is not None else var.type
        try:
            new, _ = loaded.named_graph(types)
        except MegtraceError:
            return
        moved = refold(graph, new, nodes)
        if moved is not None:
            self._file = (loaded, new, moved)

    def _compile(self) -> None:
        """Re-infer every var's shape and dtype after an edit (MegEngine recompiles its
        graph); refresh the maps from ids to nodes."""
        self.all_oprs_map = collections.OrderedDict()
        self.all_vars_map = collections.OrderedDict()
        for opr in self.all_oprs:
            if opr.op is not None:
                retype(opr)
            self.all_oprs_map[opr.id] = opr
            for o in opr.outputs:
                self.all_vars_map[o.id] = o
        # MegEngine's order: as a breadth-first walk from the outputs meets them
        self.input_vars = [v for v in get_dep_vars(self.output_vars)
                           if isinstance(v.owner, Host2DeviceCopy)]


_LAYOUT_BITS = {1: "enable_nchw4", 2: "enable_hwcd4", 3: "enable_nchw88", 4: "enable_nchw44",
                5: "enable_nchw44_dot", 6: "enable_nchw32", 7: "enable_chwn4",
                8: "enable_nchw64"}
_OPTION_BITS = {0: "enable_io16xc32", 1: "enable_ioc16", 2: "enable_fuse_conv_bias_nonlinearity",
                3: "enable_fuse_conv_bias_with_z", 5: "enable_fuse_preprocess",
                6: "enable_fuse_grain"}


def deserialize_infer_option(x: int) -> dict[str, bool]:
    """MegEngine's optimize_options bits as the dump options they stand for."""
    ret = {}
    layout = (int(x) >> 32) & 0xFFFFFFFF
    if layout in _LAYOUT_BITS:
        ret[_LAYOUT_BITS[layout]] = True
    for bit, name in _OPTION_BITS.items():
        if int(x) >> bit & 1:
            ret[name] = True
    return ret


def as_varnode(obj) -> VarNode:
    """The single VarNode `obj` stands for (a VarNode, an OpNode with one output, or a
    list of one of these)."""
    if isinstance(obj, VarNode):
        return obj
    if isinstance(obj, OpNode):
        assert len(obj.outputs) == 1, "operator {} must have one output to be converted " \
            "to VarNode; got {} actually".format(obj, len(obj.outputs))
        return obj.outputs[0]
    assert isinstance(obj, collections.abc.Iterable), \
        "{} is not compatible with VarNode".format(obj)
    items = list(obj)
    assert len(items) == 1, "{} has size {}; can not be used as a VarNode".format(obj, len(items))
    return as_varnode(items[0])


def as_oprnode(obj) -> OpNode:
    """The single OpNode `obj` stands for (an OpNode, a VarNode's owner, or a list of one)."""
    if isinstance(obj, OpNode):
        return obj
    if isinstance(obj, VarNode):
        return obj.owner
    assert isinstance(obj, collections.abc.Iterable), \
        "{} is not compatible with OpNode".format(obj)
    items = list(obj)
    assert len(items) == 1, "{} has size {}; can not be used as an OpNode".format(obj, len(items))
    return as_oprnode(items[0])


class NodeFilter:
    """Chained filters over nodes (`net.opr_filter.type(N.Elemwise).name("conv*")`);
    iterate it or end with `as_list`, `as_unique`, `as_dict`, `as_count`."""

    def __init__(self, node_iter: Iterable):
        if not isinstance(node_iter, collections.abc.Iterable):
            node_iter = [node_iter]
        self._iter = node_iter

    @classmethod
    def make_all_deps(cls, *dest_vars) -> "NodeFilter":
        """A filter over every operator `dest_vars` depend on."""
        return cls(get_oprs_seq(list(dest_vars), False, False))

    def __iter__(self):
        return iter(self._iter)

    def _with(self, pred: Callable[[Any], bool]) -> "NodeFilter":
        return NodeFilter(x for x in self if pred(x))

    def type(self, node_type) -> "NodeFilter":
        """Nodes of this class (an OpNode subclass, or VarNode)."""
        assert isinstance(node_type, type) and issubclass(node_type, N.NetworkNode), \
            "bad node type: {}".format(node_type)
        return self._with(lambda x: isinstance(x, node_type))

    def check_type(self, node_type) -> "NodeFilter":
        """Like `type`, but every node must be of it (AssertionError otherwise)."""
        def check(x):
            assert isinstance(x, node_type), "node {} is not of type {}".format(x, node_type)
            return True
        return self._with(check)

    def not_type(self, node_type) -> "NodeFilter":
        return self._with(lambda x: not isinstance(x, node_type))

    def param_provider(self) -> "NodeFilter":
        return self.type(ImmutableTensor)

    def data_provider(self) -> "NodeFilter":
        return self.type(Host2DeviceCopy)

    def name(self, pattern: str, ignorecase: bool = True) -> "NodeFilter":
        """Nodes whose name matches the shell-style pattern ("conv*", "*bias")."""
        flags = re.IGNORECASE if ignorecase else 0
        regex = re.compile(fnmatch.translate(pattern), flags)
        return self._with(lambda x: x.name is not None and regex.match(x.name) is not None)

    def has_input(self, var: VarNode) -> "NodeFilter":
        """Operators reading `var`."""
        return self._with(lambda x: isinstance(x, OpNode) and any(i is var for i in x.inputs))

    def as_list(self) -> list:
        return list(self)

    def as_unique(self):
        """The single node (AssertionError when there are none or several)."""
        items = self.as_list()
        assert len(items) == 1, "{} has {} nodes, expected exactly one".format(self, len(items))
        return items[0]

    def as_dict(self) -> dict:
        """{name: node}; names must be unique."""
        ret = collections.OrderedDict()
        for x in self:
            assert x.name not in ret, "duplicated name {} in this filter".format(x.name)
            ret[x.name] = x
        return ret

    def as_count(self) -> int:
        return sum(1 for _ in self)
