"""`megtrace.utils.network_node`: MegEngine 1.13's nodes of a `Network` (an editable view
of a loaded model): `VarNode` (a Tensor, so megtrace.functional applies to it and adds
nodes) and `OpNode` with one subclass per MegEngine operator type.

A node holds megtrace IR: an OpNode its `OpDef` and bound params, a VarNode its IR `Var`
(shape and dtype). `type`, `name` and `params` are MegEngine's: the operator the .mge
writer writes the node as, with that operator's param fields (`params["mode"] == "ADD"`).
`Network.dump` turns the nodes back into an IR graph for the writer (megtrace/dump.py).
"""
from __future__ import annotations

import dataclasses
import itertools
import re
import weakref
from typing import Any, Sequence

import numpy as np

from .. import device as _device
from .. import dtype as _dt
from ..core._trace_option import set_symbolic_shape, use_symbolic_shape  # noqa: F401
from ..errors import MegtraceError, TraceError
from ..ir import TensorType, Var
from ..ops import OpDef
from ..tensor import Tensor
from .module_stats import register_flops

_seq = itertools.count()           # creation order: the priority of a node without one
# the VarNode standing for each IR value (the latest made for it)
_NODE_OF: "weakref.WeakValueDictionary[Var, VarNode]" = weakref.WeakValueDictionary()


class NetworkNode:
    """Base of VarNode and OpNode (MegEngine's marker class)."""


class VarNode(NetworkNode, Tensor):
    """A value of a Network: its shape and dtype, the OpNode computing it (`owner`) and
    those reading it (`users`). It has no value; functional ops on it add OpNodes."""

    def __new__(cls, var: Var, *, owner_opr: "OpNode | None" = None, name: str | None = None):
        if owner_opr is None and name is None:
            # MegEngine's `VarNode(x.var)`: the node of that graph value, not a detached one
            known = _NODE_OF.get(var)
            if known is not None and known._var is var:
                return known
        obj = object.__new__(cls)
        obj._value, obj._var, obj._owner, obj._version = None, var, BUILDER, 0
        obj._qparams, obj._format, obj._ad = None, "default", None
        obj._device = _device.as_device(None)
        obj._name = name if name is not None else var.name_hint
        obj.__dict__.update(owner=owner_opr, users=[])
        _NODE_OF[var] = obj
        return obj

    def __init__(self, var: Var, *, owner_opr: "OpNode | None" = None, name: str | None = None):
        pass

    @property
    def var(self) -> Var:
        """The megtrace IR value this node stands for."""
        return self._var

    @property
    def id(self) -> int:
        return id(self)

    @property
    def partial_shape(self) -> tuple[int, ...]:
        """The inferred shape as a tuple."""
        return tuple(self._var.type.shape)

    @property
    def _tuple_shape(self) -> tuple[int, ...]:
        return self.partial_shape

    @property
    def shape_unknown(self) -> bool:
        """Whether MegEngine's static shape inference leaves this value's shape unknown:
        it follows a value-shaped op (CondTake), whose result size only a run gives."""
        seen, stack = set(), [self]
        while stack:
            var = stack.pop()
            owner = var.owner
            if owner is None or id(owner) in seen:
                continue
            seen.add(id(owner))
            if owner.op is not None and owner.op.value_shaped:
                return True
            stack.extend(owner.inputs)
        return False

    @property
    def shape(self):
        """A VarNode of the shape with set_symbolic_shape(True), else a tuple."""
        if use_symbolic_shape():
            return self.shapeof()
        return self.partial_shape

    def shapeof(self, axis: int | None = None) -> "VarNode":
        """The shape (or one dimension of it) as a VarNode."""
        out = ImmutableTensor(np.asarray(self.partial_shape, np.int32)).outputs[0]
        return out if axis is None else out[axis]

    def set_owner_opr(self, owner_opr: "OpNode") -> None:
        self.owner = owner_opr

    def _reset(self, other) -> None:
        """`x += y`, `x[...] = v`: this node becomes the result (it takes the place of the
        new var among its owner's outputs)."""
        if not isinstance(other, VarNode):
            other = BUILDER._as_varnode(other if isinstance(other, Tensor) else Tensor(other))
        # the value this node stood for stays in the graph as a node of its own
        before = VarNode(self._var, owner_opr=self.owner, name=self.name)
        before.users = self.users
        if self.owner is not None:
            self.owner.outputs = [before if o is self else o for o in self.owner.outputs]
        for user in self.users:
            user.inputs = [before if i is self else i for i in user.inputs]
        self.users = []
        owner = other.owner
        if owner is not None:
            owner.outputs = [self if o is other else o for o in owner.outputs]
        self._var, self.owner = other._var, owner
        self._version += 1

    def _set_type(self, type_: TensorType) -> None:
        if type_ != self._var.type:
            self._var = Var(type_, self._var.name_hint)

    def numpy(self) -> np.ndarray:
        """The value, when it follows from constants alone (MegEngine's static value
        inference); a value that needs the network's inputs has none."""
        value = _static_value(self)
        if value is None:
            raise TraceError.because("value unreadable", f"VarNode {self.name!r} of a Network "
                                     "depends on its inputs and has no value; dump the network "
                                     "and run the file")
        return value.copy()

    def __bool__(self) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "VarNode:" + str(self.name)


def _static_value(node: VarNode) -> np.ndarray | None:
    """`node`'s value computed from the constants it depends on, each op run with its NumPy
    implementation (iteratively: a deep network must not exhaust Python's stack); None
    when it depends on an input or on an op megtrace cannot run alone."""
    values: dict[int, np.ndarray | None] = {}
    stack = [node]
    while stack:
        var = stack[-1]
        if id(var) in values:
            stack.pop()
            continue
        owner = var.owner
        if isinstance(owner, ConstOpBase):
            values[id(var)] = owner.numpy()
        elif owner is None or owner.op is None or isinstance(owner, Host2DeviceCopy):
            values[id(var)] = None
        else:
            pending = [v for v in owner.inputs if id(v) not in values]
            if pending:
                stack.extend(pending)
                continue
            ins = [values[id(v)] for v in owner.inputs]
            outs = None if any(v is None for v in ins) else \
                owner.op.run_eager(ins, owner.kwargs)
            for i, out in enumerate(owner.outputs):
                values[id(out)] = None if outs is None else outs[i]
            values.setdefault(id(var), None)
        stack.pop()
    return values[id(node)]


class OpNode(NetworkNode):
    """An operator of a Network. `inputs`/`outputs` are VarNodes (edit `inputs` to
    rewire); `params` are MegEngine's param fields of the operator, `op`/`kwargs` the
    megtrace operator the node runs."""

    type: str | None = None

    def __init__(self):
        self.inputs: list[VarNode] = []
        self.outputs: list[VarNode] = []
        self.params: dict[str, Any] = {}
        self.name: str | None = None
        self.op: OpDef | None = None
        self.kwargs: dict[str, Any] = {}
        self._seq = next(_seq)

    @property
    def id(self) -> int:
        return id(self)

    @property
    def priority(self) -> tuple[int, int]:
        return (0, self._seq)

    @property
    def cxx_type(self) -> str:
        """MegEngine's C++ operator type (what comp_graph_tools reports):
        "ConvolutionForward" where `type` says "Convolution"."""
        return self.type if isinstance(self, ReadOnlyOpNode) else type(self).__name__

    def set_kwargs(self, kwargs: dict, input_types: Sequence[TensorType]) -> None:
        """New params for the node's op (and MegEngine's param fields to match)."""
        # lazy: the .mge writer loads flatbuffers (`import megtrace` stays light)
        from .network_types import mge_operator
        self.kwargs = dict(kwargs)
        self.params = dict(mge_operator(self.op, self.kwargs, list(input_types))[1])

    def add_inp_var(self, x: VarNode) -> None:
        self.inputs.append(x)

    def add_out_var(self, x: VarNode) -> None:
        self.outputs.append(x)

    def __repr__(self) -> str:
        return "%s{%s}" % (self.name, self.type)


class ReadOnlyOpNode(OpNode):
    """An operator without a class of its own here; `type` is its MegEngine type."""


class Host2DeviceCopy(OpNode):
    """A graph input (MegEngine's data provider)."""

    type = "Host2DeviceCopy"

    def __init__(self, shape: Sequence[int] | None = None, dtype=None, name: str | None = None,
                 device=None):
        super().__init__()
        self.name = name
        self.device = device or "xpux"
        if shape is not None:
            # TensorType keeps a quantized dtype's parameters (NumPy dtype metadata)
            var = Var(TensorType(tuple(shape), dtype if dtype is not None else "float32"),
                      name or "")
            self.outputs = [VarNode(var, owner_opr=self, name=name)]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.outputs[0].partial_shape

    @shape.setter
    def shape(self, shape: Sequence[int]) -> None:
        out = self.outputs[0]
        out._set_type(dataclasses.replace(out._var.type, shape=tuple(int(d) for d in shape)))

    @property
    def dtype(self) -> np.dtype:
        return self.outputs[0].dtype


class ConstOpBase(OpNode):
    """A constant of the graph (a parameter)."""

    type = "ConstOpBase"

    def __init__(self, data=None, name: str | None = None, device=None, graph=None):
        super().__init__()
        self.name = name
        self.device = device
        self.graph = graph
        self._value: np.ndarray | None = None
        if data is not None:
            self.set_value(data)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.outputs[0].partial_shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    def numpy(self) -> np.ndarray:
        return self._value.copy()

    def set_value(self, data, device=None) -> None:
        """A new value (MegEngine narrows float64 to float32 and int64 to int32)."""
        if not isinstance(data, (int, float, Sequence, np.ndarray)):
            raise TypeError(f"set_value: expected a number, a sequence or an ndarray; got "
                            f"{type(data).__name__}")
        arr = np.array(data)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.int64:
            arr = arr.astype(np.int32)
        self._value = _dt.as_array(arr)
        type_ = TensorType.of(self._value)
        if not self.outputs:
            self.outputs = [VarNode(Var(type_, self.name or ""), owner_opr=self, name=self.name)]
        else:
            self.outputs[0]._set_type(type_)
        device = device if device is not None else self.device
        if device is not None:
            self.outputs[0]._device = _device.as_device(device)


class ImmutableTensor(ConstOpBase):
    type = "ImmutableTensor"


class SharedDeviceTensor(ConstOpBase):
    type = "SharedDeviceTensor"


# MegEngine's OpNode subclasses: class name -> its `type` string (network_node.py of 1.13).
_CLASSES = {
    "Elemwise": "Elemwise", "ElemwiseMultiType": "ElemwiseMultiType", "Reduce": "Reduce",
    "TypeCvt": "TypeCvt", "MatrixInverse": "MatrixInverse", "MatrixMul": "MatrixMul",
    "BatchedMatrixMul": "BatchedMatmul", "Dot": "Dot", "SVD": "SVD",
    "ConvolutionForward": "Convolution", "ConvolutionBackwardData": "ConvTranspose",
    "DeformableConvForward": "DeformableConv", "GroupLocalForward": "GroupLocal",
    "PoolingForward": "Pooling", "AdaptivePoolingForward": "AdaptivePooling",
    "ROIPoolingForward": "ROIPooling", "DeformablePSROIPoolingForward": "DeformablePSROIPooling",
    "ConvBiasForward": "ConvBias", "BatchConvBiasForward": "BatchConvBias",
    "BatchNormForward": "BatchNorm", "ROIAlignForward": "ROIAlign",
    "WarpPerspectiveForward": "WarpPerspective", "WarpAffineForward": "WarpAffine",
    "RemapForward": "Remap", "ResizeForward": "Resize", "IndexingOneHot": "IndexingOneHot",
    "IndexingSetOneHot": "IndexingSetOneHot", "Copy": "Copy", "ArgsortForward": "Argsort",
    "Argmax": "Argmax", "Argmin": "Argmin", "CondTake": "CondTake", "TopK": "TopK",
    "NvOf": "NvOf", "RNGOpr": "RNGOpr", "Linspace": "Linspace", "Eye": "Eye",
    "GetVarShape": "GetVarShape", "Concat": "Concat", "Broadcast": "Broadcast",
    "Identity": "Identity", "NMSKeep": "NMSKeep", "Dimshuffle": "Dimshuffle",
    "Reshape": "Reshape", "AxisAddRemove": "AxisAddRemove", "AssertEqual": "AssertEqual",
    "CvtColorForward": "CvtColor",
}
_INDEXING = ("Subtensor", "SetSubtensor", "IncrSubtensor", "IndexingMultiAxisVec",
             "IndexingSetMultiAxisVec", "IndexingIncrMultiAxisVec", "MeshIndexing",
             "SetMeshIndexing", "IncrMeshIndexing", "BatchedMeshIndexing",
             "BatchedSetMeshIndexing", "BatchedIncrMeshIndexing")


class IndexingBase(OpNode):
    """MegEngine's base of the Subtensor/indexing oprs."""


def _declare(name: str, type_: str, base: type = OpNode) -> type:
    cls = type(name, (base,), {"type": type_, "__module__": __name__,
                               "__doc__": f"MegEngine's {type_} operator."})
    globals()[name] = cls
    return cls


for _name, _type in _CLASSES.items():
    _declare(_name, _type)
for _name in _INDEXING:
    _declare(_name, _name, IndexingBase)

# serialized MegEngine type (no V<n>) -> class, where the class name is not the type
_BY_SERIALIZED = {"Convolution": "ConvolutionForward", "ConvolutionBackwardData":
                  "ConvolutionBackwardData", "ConvBiasForward": "ConvBiasForward",
                  "BatchConvBiasForward": "BatchConvBiasForward", "BatchNorm": "BatchNormForward",
                  "Pooling": "PoolingForward", "AdaptivePooling": "AdaptivePoolingForward",
                  "WarpPerspective": "WarpPerspectiveForward", "WarpAffine": "WarpAffineForward",
                  "Remap": "RemapForward", "Resize": "ResizeForward", "Argsort": "ArgsortForward",
                  "ROIAlign": "ROIAlignForward", "ROIPooling": "ROIPoolingForward",
                  "DeformableConvForward": "DeformableConvForward",
                  "DeformablePSROIPoolingForward": "DeformablePSROIPoolingForward",
                  "GroupLocal": "GroupLocalForward", "CvtColor": "CvtColorForward",
                  "NMSKeepMGB": "NMSKeep", "UniformRNG": "RNGOpr", "GaussianRNG": "RNGOpr",
                  "GammaRNG": "RNGOpr", "PoissonRNG": "RNGOpr", "BetaRNG": "RNGOpr",
                  "PermutationRNG": "RNGOpr", "BatchedMatrixMul": "BatchedMatrixMul"}


def class_for(serialized_type: str) -> type:
    """The OpNode class of a MegEngine operator (its serialized type name, `V<n>` or
    not); ReadOnlyOpNode for one without its own class."""
    base = re_base(serialized_type)
    name = _BY_SERIALIZED.get(base, base)
    cls = globals().get(name)
    if isinstance(cls, type) and issubclass(cls, OpNode) and cls not in (OpNode, ConstOpBase):
        return cls
    return ReadOnlyOpNode


def cxx_type_of(op: OpDef, kwargs: dict, types: Sequence[TensorType]) -> str:
    """MegEngine's C++ type of the opr `op` is written as (its OpNode class's name)."""
    # lazy: the .mge writer loads flatbuffers (`import megtrace` stays light)
    from .network_types import mge_operator
    mge_type, _ = mge_operator(op, kwargs, types)
    cls = class_for(mge_type)
    return re_base(mge_type) if cls is ReadOnlyOpNode else cls.__name__


def make_opnode(op: OpDef, kwargs: dict, inputs: Sequence[VarNode], out_vars: Sequence[Var],
                name: str | None = None) -> OpNode:
    """The OpNode running `op` on `inputs`, with its outputs `out_vars` as VarNodes."""
    # lazy: the .mge writer loads flatbuffers (`import megtrace` stays light)
    from .network_types import mge_operator
    mge_type, fields = mge_operator(op, kwargs, [v._var.type for v in inputs])
    cls = class_for(mge_type)
    node = cls.__new__(cls)
    OpNode.__init__(node)
    if cls is ReadOnlyOpNode:
        node.type = re_base(mge_type)
    node.op, node.kwargs, node.params = op, dict(kwargs), dict(fields)
    node.name = name or node.type
    node.inputs = list(inputs)
    node.outputs = [VarNode(v, owner_opr=node) for v in out_vars]
    for x in inputs:
        x.users.append(node)
    return node


def re_base(serialized_type: str) -> str:
    """A serialized type name without its version suffix (ReshapeV1 -> Reshape)."""
    return re.sub(r"V\d$", "", serialized_type)


# -- FLOPs of operators (module_stats.get_op_stats on OpNodes), as MegEngine counts them --
@register_flops(Elemwise, ElemwiseMultiType)                       # noqa: F821 (declared above)
def flops_elemwise(opnode: OpNode, inputs, outputs) -> int:
    return int(np.prod(outputs[0].shape))


@register_flops(MatrixMul)                                          # noqa: F821
def flops_matmul(opnode: OpNode, inputs, outputs) -> int:
    assert len(inputs[0].shape) == 2 and len(outputs[0].shape) == 2
    return int(np.prod(outputs[0].shape)) * inputs[0].shape[1]


@register_flops(BatchedMatrixMul)                                   # noqa: F821
def flops_batchmatmul(opnode: OpNode, inputs, outputs) -> int:
    assert len(inputs[0].shape) == 3 and len(outputs[0].shape) == 3
    return int(np.prod(outputs[0].shape)) * inputs[0].shape[2]


@register_flops(ConvolutionForward, ConvBiasForward)                # noqa: F821
def flops_conv(opnode: OpNode, inputs, outputs) -> float:
    """N x Cout x H x W x (Cin x Kh x Kw), plus one per output for ConvBias's bias."""
    w = inputs[1].shape
    cin = w[2] if len(w) == 5 else w[1]
    bias = 1 if isinstance(opnode, ConvBiasForward) else 0         # noqa: F821
    return int(np.prod(outputs[0].shape)) * (float(cin * w[-2] * w[-1]) + bias)


class NodeBuilder:
    """What megtrace.dispatch.apply hands an op applied to a VarNode (as a trace's
    recorder gets them): it adds the OpNode, typed by the op's shape rule. Plain tensors
    among the inputs become ImmutableTensor nodes."""

    names_values = False
    builds_nodes = True

    def record(self, op: OpDef, inputs: tuple, params: dict) -> tuple:
        ins = [self._as_varnode(t) for t in inputs]
        kwargs = dict(op.bind(params))
        out_types = op.infer_types([v._var.type for v in ins], kwargs)
        if op.fold_from_types:       # shape-only ops (get_shape): a constant, as in loading
            values = op.run_eager([np.zeros(v._var.type.shape, v._var.type.dtype)
                                   for v in ins], kwargs)
            return tuple(ImmutableTensor(np.asarray(val, t.dtype)).outputs[0]
                         for val, t in zip(values, out_types))
        node = make_opnode(op, kwargs, ins, [Var(t) for t in out_types])
        return tuple(node.outputs)

    def _as_varnode(self, t) -> VarNode:
        if isinstance(t, VarNode):
            return t
        if t._value is None:
            raise MegtraceError(f"a {type(t).__name__} of a trace cannot be used with "
                                "Network VarNodes; use an eager Tensor or a VarNode")
        return ImmutableTensor(t._value).outputs[0]

    def read_value(self, t) -> np.ndarray:
        return t.numpy()

    def materialize_live(self) -> None:
        pass

    def random_key(self, seed, kind, device) -> None:
        raise MegtraceError("random ops on Network VarNodes are not supported")


BUILDER = NodeBuilder()
