"""Graph -> MegEngine FBS_V2 bytes (one size-prefixed "mgv2" flatbuffer).

Each node is written from its op's `mge` declaration; ids follow MegEngine's rules:
one consecutive id per non-volatile output, and every id named in `middle_tensors`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np

from megtrace import dtype as _dt
from megtrace.errors import UnsupportedOpError
from megtrace.ir import Graph, TensorType, Var
from megtrace.ops import MgeChoice, MgeComposite, MgeOpr

from . import tables
from .compat import CONVERTERS, CompatEmitter
from .oprs import identity
from .strip_info import strip_info

MGE_VERSION = 101300          # MegEngine 1.13.0: what we claim to be compatible with
MODEL_VERSION = 2
COMP_NODE = "xpux:0"
INT_MIN = -2147483648


@dataclass
class DumpOptions:
    keep_var_name: int = 1
    keep_opr_name: bool = False
    keep_opr_priority: bool = False
    no_change_graph: bool = False
    user_info: Any = None
    enable_metadata: bool = True
    model_version: int = MODEL_VERSION
    optimize_options: int = 0
    graph_modified: bool = False
    user_info_bytes: bytes | None = None      # already pickled (dump_graph's metadata)
    format: str = "FBS_V2"                    # or "FBS" (the V1 "MGBC" container)
    compat_8_14: bool = False                 # FBS only: the "MGBS" variant


@dataclass
class _Tensor:
    shape: tuple[int, ...]
    dtype: str
    name: str | None = None
    data: np.ndarray | None = None
    comp_node: str = COMP_NODE
    image_axis: int | None = None     # Image2DPack4 format's align axis (NHWCD4 constants)


@dataclass
class _Opr:
    type: str
    params: list[tuple[str, dict]]
    inputs: list[int]
    outputs: list[int]
    name: str
    tensors: list[_Tensor] = field(default_factory=list)
    output_dtype: str | None = None    # OperatorNodeConfig's output dtype (fused TypeCvt)


@dataclass
class DumpResult:
    """What MegEngine's `CompGraphDumpResult` reports (content_hash is 0 for FBS_V2)."""

    nr_opr: int
    tot_bytes: int
    tensor_value_bytes: int
    content_hash: int
    inputs: list[str]
    outputs: list[str]
    params: list[str]
    strip_info: dict = field(default=None, repr=False, compare=False)


class Emitter:
    """Collects MegEngine oprs; `MgeComposite.emit` functions call `opr` and `const`."""

    def __init__(self):
        self.oprs: list[_Opr] = []
        self.names: list[str] = []
        self.dtypes: dict[int, str] = {}
        self.requested_modes: set[str] = set()     # Elemwise modes before compat rewrites
        self.requested_types: set[str] = set()
        self._taken: dict[str, int] = {}
        self._consts: dict[tuple, int] = {}
        self._hint = ""
        self._image_holder: _Opr | None = None

    def dtype_of(self, vid: int) -> str:
        return self.dtypes.get(vid, "float32")

    def _new_ids(self, names: list[str]) -> list[int]:
        ids = []
        for name in names:
            n = self._taken.get(name, 0)
            self._taken[name] = n + 1
            self.names.append(name if n == 0 else f"{name}[{n}]")
            ids.append(len(self.names) - 1)
        return ids

    def opr(self, spec: MgeOpr, fields: dict, inputs: list[int], name: str = "",
            output_dtype: str | None = None) -> int:
        """Append one MegEngine opr; returns the id of its result. `output_dtype` is the
        opr config's output dtype (a WarpPerspective that writes float32 from uint8)."""
        return self.opr_all(spec, fields, inputs, name, output_dtype)[spec.result]

    def opr_all(self, spec: MgeOpr, fields: dict, inputs: list[int], name: str = "",
                output_dtype: str | None = None) -> list[int]:
        """Append one MegEngine opr; returns the ids of all its outputs."""
        name = name or f"{self._hint or spec.type}"
        outs = [name] if spec.outputs == 1 else [f"{name}:o{i}" for i in range(spec.outputs)]
        ids = self._new_ids(outs)
        params = [] if spec.param is None else [(spec.param, fields)]
        params += [(t, dict(f)) for t, f in spec.extra]
        self.oprs.append(_Opr(spec.type, params, list(inputs), ids, name,
                              output_dtype=output_dtype))
        self.requested_types.add(spec.type)
        if spec.type == "Elemwise":
            self.requested_modes.add(fields.get("mode", "RELU"))
        dtype = _dt.read_file_dtype(_dt_enum(fields["type"]), fields.get("scale"),
                                    fields.get("zero_point") or 0) \
            if spec.param == "DType" else \
            output_dtype or (self.dtype_of(inputs[0]) if inputs else "float32")
        for vid in ids:
            self.dtypes[vid] = dtype
        return ids

    def const(self, array: np.ndarray, name: str = "") -> int:
        """One ImmutableTensor per distinct (name, value): writers spell index and shape
        constants afresh at each use."""
        array = np.ascontiguousarray(array)
        key = (name, array.dtype.str, _dt.QuantParam.of(array.dtype), array.shape,
               array.tobytes())
        if key not in self._consts:
            self._consts[key] = self._new_const(array, name)
        return self._consts[key]

    def _new_const(self, array: np.ndarray, name: str) -> int:
        shape = array.shape or (1,)
        label = name or f"const{list(shape)}"
        (vid,) = self._new_ids([label])
        t = _Tensor(shape, _dt.file_dtype(array.dtype), None, array.reshape(shape))
        self.oprs.append(_Opr("ImmutableTensor", [], [], [vid], label, [t]))
        self.dtypes[vid] = t.dtype
        self.requested_types.add("ImmutableTensor")
        return vid

    def image_format(self, vid: int, align_axis: int) -> None:
        """Give the constant `vid` MegEngine's Image2DPack4 tensor format: the NHWCD4 layout's
        filters and biases are stored so, all in one MultipleDeviceTensorWithFormatHolder
        (what MegEngine's ParamFusePass leaves). Values computed in the graph keep theirs."""
        for i, o in enumerate(self.oprs):
            if o.type == "ImmutableTensor" and o.outputs == [vid]:
                break
        else:
            return
        t = o.tensors[0]
        t.image_axis = align_axis
        if self._image_holder is None:
            self._image_holder = _Opr("MultipleDeviceTensorWithFormatHolder", [], [], [vid],
                                      "params", [t])
            self.oprs[i] = self._image_holder
            self.requested_types.add("MultipleDeviceTensorWithFormatHolder")
        else:
            del self.oprs[i]
            self._image_holder.outputs.append(vid)
            self._image_holder.tensors.append(t)

    def image_elemwise_consts(self) -> None:
        """Constants an Elemwise reads beside an NHWCD4 value are NHWCD4 too (biases,
        shifts): MegEngine stores them Image2DPack4 with the filters. Image values are what
        RelayoutFormat NCHW_NHWCD4I and NHWCD4 oprs write, and Elemwise/Concat of them."""
        image: set[int] = set()
        made_by = {vid: o for o in self.oprs for vid in o.outputs}
        for o in list(self.oprs):        # (image_format moves constants into the holder)
            fields = o.params[0][1] if o.params else {}
            if fields.get("format") == "NHWCD4" or fields.get("mode") == "NCHW_NHWCD4I" or \
                    (o.type in ("Elemwise", "Concat") and image & set(o.inputs)):
                image.update(o.outputs)
            if o.type == "Elemwise" and image & set(o.inputs):
                for vid in o.inputs:
                    src = made_by[vid]
                    if src.type == "ImmutableTensor" and len(src.tensors[0].shape) == 5:
                        self.image_format(vid, 2)

    def shared(self, array: np.ndarray, comp_node: str = "cpux:0") -> int:
        """A SharedDeviceTensor (what testcase graphs are made of)."""
        array = np.ascontiguousarray(array)
        shape = array.shape or (1,)
        (vid,) = self._new_ids([f"shared[{len(self.names)}]"])
        t = _Tensor(shape, _dt.canonical(array.dtype), None, array.reshape(shape), comp_node)
        self.oprs.append(_Opr("SharedDeviceTensor", [], [], [vid], "shared", [t]))
        self.dtypes[vid] = t.dtype
        return vid

    def input(self, name: str, type: TensorType) -> int:
        (vid,) = self._new_ids([name])
        dtype = type.quant or type.dtype
        t = _Tensor(type.shape or (1,), dtype, name)
        self.oprs.append(_Opr("Host2DeviceCopy", [("Host2DeviceCopy", {})], [], [vid], name, [t]))
        self.dtypes[vid] = dtype
        self.requested_types.add("Host2DeviceCopy")
        return vid


def _spec_for(node) -> MgeOpr | MgeComposite | None:
    mge = node.op.mge
    if isinstance(mge, MgeChoice):
        return mge.choose([v.type for v in node.inputs])
    return mge


def emit_graph(graph: Graph, input_names: list[str], output_names: list[str],
               compat: bool = True) -> tuple[Emitter, list[int]]:
    """Lower every node to MegEngine oprs; all unsupported ops are reported together.
    `compat` applies MegEngine's compatibility rewrites (fbs/compat.py)."""
    specs = [(node, _spec_for(node)) for node in graph.nodes]
    missing = sorted({f"{n.op.name}({', '.join(str(v.type) for v in n.inputs)})"
                      for n, s in specs if s is None})
    if missing:
        raise UnsupportedOpError(f"dump: no MegEngine operator for {', '.join(missing)}")
    em = Emitter()
    ids: dict[Var, int] = {}
    for var, name in zip(graph.inputs, input_names):
        ids[var] = em.input(name, var.type)

    def id_of(var: Var) -> int:
        if var not in ids:
            ids[var] = em.const(graph.consts[var], var.name_hint)
        return ids[var]

    out_em = CompatEmitter(em) if compat else em
    for node, spec in specs:
        in_ids = [id_of(v) for v in node.inputs]
        em._hint = node.outputs[0].name_hint or node.op.name
        kwargs = node.kwargs
        if isinstance(spec, MgeComposite):
            outs = spec.emit(out_em, [v.type for v in node.inputs], kwargs, in_ids)
        elif compat and spec.type == "Elemwise" and spec.fields_for(kwargs)["mode"] in CONVERTERS:
            outs = [out_em.opr(spec, spec.fields_for(kwargs), in_ids)]
        else:
            all_ids = out_em.opr_all(spec, spec.fields_for(kwargs), in_ids)
            outs = [all_ids[i] for i in (spec.results or (spec.result,))]
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        for var, vid in zip(node.outputs, outs):
            ids[var] = vid
            em.dtypes[vid] = var.type.quant or var.type.dtype
    out_ids = [id_of(v) for v in graph.outputs]
    if em._image_holder is not None:
        em.image_elemwise_consts()
    for vid, name in zip(out_ids, output_names):
        if name:
            em.names[vid] = name
    return em, out_ids


def dump_graph(graph: Graph, input_names: list[str], output_names: list[str],
               options: DumpOptions | None = None) -> tuple[bytes, DumpResult]:
    """Serialize `graph` as an FBS_V2 model; returns the bytes and a DumpResult."""
    options = options or DumpOptions()
    em, out_ids = emit_graph(graph, input_names, output_names, compat=not options.no_change_graph)
    out_ids = drop_collapsing(em, out_ids)
    unique_opr_names(em)
    content_hash = 0
    if options.format == "FBS":
        from .writer_v1 import serialize_v1
        data, content_hash = serialize_v1(em, out_ids, options, options.compat_8_14)
        value_bytes = sum(t.data.nbytes for o in em.oprs for t in o.tensors if t.data is not None)
    else:
        data, value_bytes = serialize(em, out_ids, options)
    out_names = [em.names[i] for i in out_ids] if options.keep_var_name else \
        [f"unnamed{i}" for i in range(len(out_ids))]
    result = DumpResult(len(em.oprs), len(data), value_bytes, content_hash, sorted(input_names),
                        out_names, [])
    result.strip_info = strip_info(em)
    return data, result


def drop_collapsing(em: Emitter, out_ids: list[int]) -> list[int]:
    """Leave out every opr that MegEngine's loader would not rebuild as written (a
    reshape to the shape its input already has, ...: fbs/load_collapse.py), using the var
    its `make` hands back instead, as the loader would; returns the new output ids.
    Needs the reader to know every opr written; a graph it cannot read is left as is."""
    from megtrace.errors import MegtraceError

    from .reader import read_model
    from .to_graph import find_collapses
    try:
        collapses = find_collapses(read_model(serialize(em, out_ids, DumpOptions())[0]))
    except MegtraceError:      # an opr the reader does not know (tests/ops asks for all)
        return renumber(em, out_ids)
    return renumber(em, out_ids, {c.index: c.target for c in collapses})


def unique_opr_names(em: Emitter) -> None:
    """Oprs sharing a name are called `name[0]`, `name[1]`, ... in graph order, as
    MegEngine's AutoNaming leaves them (Network's filters index oprs by name); a
    one-output opr's var named after it follows."""
    by_name: dict[str, list] = {}
    for opr in em.oprs:
        by_name.setdefault(opr.name, []).append(opr)
    for name, oprs in by_name.items():
        if len(oprs) < 2:
            continue
        for i, opr in enumerate(oprs):
            opr.name = f"{name}[{i}]"
            if len(opr.outputs) == 1 and em.names[opr.outputs[0]] in (name, f"{name}[{i}]"):
                em.names[opr.outputs[0]] = opr.name


def renumber(em: Emitter, out_ids: list[int], dropped: dict[int, int] | None = None) -> list[int]:
    """Number the vars in the order the oprs define them, as MegEngine's loader expects,
    leaving out the oprs in `dropped` (index -> the var used instead); returns the new
    output ids. Only needed when oprs were dropped or merged (image-format constants)."""
    dropped = dropped or {}
    if not dropped and em._image_holder is None:
        return out_ids
    new_id: dict[int, int] = {}
    oprs, names, dtypes = [], [], {}
    for index, opr in enumerate(em.oprs):
        if index in dropped:
            for vid in opr.outputs:
                new_id[vid] = new_id[dropped[index]]
            continue
        opr.inputs = [new_id[i] for i in opr.inputs]
        outs = []
        for vid in opr.outputs:
            new_id[vid] = len(names)
            names.append(em.names[vid])
            dtypes[len(names) - 1] = em.dtypes.get(vid, "float32")
            outs.append(new_id[vid])
        opr.outputs = outs
        oprs.append(opr)
    for old in out_ids:                    # an output handed back keeps its own name
        names[new_id[old]] = em.names[old]
    em.oprs, em.names, em.dtypes = oprs, names, dtypes
    em._consts = {}
    return [new_id[i] for i in out_ids]


def serialize(em: Emitter, out_ids: list[int], options: DumpOptions) -> tuple[bytes, int]:
    """The size-prefixed "mgv2" flatbuffer of everything `em` collected."""
    b = flatbuffers.Builder(1 << 16)
    value_bytes = 0
    opr_offsets = []
    for index, opr in enumerate(em.oprs):
        offset, nbytes = _build_opr(b, opr, index, options)
        opr_offsets.append(offset)
        value_bytes += nbytes
    from .generated import Model, OutputVar, MiddleTensor
    oprs_vec = _offset_vector(b, Model.StartOprsVector, opr_offsets)
    middle = None
    if options.keep_var_name >= 1:
        mts = []
        for name in em.names:
            s = b.CreateString(name)
            MiddleTensor.Start(b)
            MiddleTensor.AddName(b, s)
            mts.append(MiddleTensor.End(b))
        middle = _offset_vector(b, Model.StartMiddleTensorsVector, mts)
    outs = []
    for vid in out_ids:
        OutputVar.Start(b)
        OutputVar.AddCompactId(b, vid)
        OutputVar.AddOriginalId(b, vid)
        outs.append(OutputVar.End(b))
    outs_vec = _offset_vector(b, Model.StartOutputVarsIdxVector, outs)
    alias_vec = _offset_vector(b, Model.StartOutputAliasVector, [])
    meta = build_metadata(b, options)
    Model.Start(b)
    Model.AddMgeVersion(b, MGE_VERSION)
    Model.AddModelVersion(b, options.model_version)
    Model.AddOprs(b, oprs_vec)
    if middle is not None:
        Model.AddMiddleTensors(b, middle)
    Model.AddOutputVarsIdx(b, outs_vec)
    Model.AddOutputAlias(b, alias_vec)
    Model.AddNrSharedTensor(b, sum(o.type == "SharedDeviceTensor" for o in em.oprs))
    Model.AddMetadata(b, meta)
    b.FinishSizePrefixed(Model.End(b), b"mgv2")
    return bytes(b.Output()), value_bytes


def _offset_vector(b, start, offsets: list[int]) -> int:
    start(b, len(offsets))
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _uint_vector(b, start, values) -> int:
    start(b, len(values))
    for v in reversed(list(values)):
        b.PrependUint32(int(v))
    return b.EndVector()


def _dt_enum(value) -> int:
    """A DTypeEnum field given by number or by its schema name."""
    return value if isinstance(value, int) else \
        _dt.QUANT_ENUM.get(value) or _dt.from_mge_enum(value).mge_enum


def _build_dtype(b, dtype: str | _dt.QuantParam) -> int:
    """A DType table; MegEngine's quantized dtypes carry their LinearQuantizationParam
    (scale; zero point for the asymmetric ones)."""
    from .generated import DType
    if isinstance(dtype, _dt.QuantParam):
        if dtype.name in ("QuantizedS4", "Quantized4Asymm", "QuantizedS1"):
            raise UnsupportedOpError(f"dump: {dtype.name} values (packed 4-bit/1-bit in "
                                     "MegEngine's files) cannot be written by megtrace")
        return tables.build(b, "DType", {"type": dtype.mge_enum, "scale": dtype.scale,
                                         "zero_point": dtype.zero_point})
    DType.Start(b)
    enum = _dt.info(dtype).mge_enum
    if enum:
        DType.AddType(b, enum)
    return DType.End(b)


def _bytes_vector(b, raw: bytes, alignment: int = 16) -> int:
    """A [ubyte] vector whose payload is `alignment`-aligned (tensor data)."""
    b.StartVector(1, len(raw), alignment)
    b.head = b.head - len(raw)
    b.Bytes[b.head:b.head + len(raw)] = raw
    return b.EndVector()


def _build_tensor(b, t: _Tensor) -> tuple[int, int]:
    from .generated import (CompNode, DefaultTensorFormat, Image2DPackedTensorFormat, Tensor,
                            TensorFormat)
    name = b.CreateString(t.name) if t.name else None
    shape = _uint_vector(b, Tensor.StartShapeVector, t.shape)
    loc = b.CreateString(t.comp_node)
    CompNode.Start(b)
    CompNode.AddLogicalLocator(b, loc)
    comp = CompNode.End(b)
    dtype = _build_dtype(b, t.dtype)
    if t.image_axis is None:
        DefaultTensorFormat.Start(b)
        fmt, fmt_type = DefaultTensorFormat.End(b), TensorFormat.TensorFormat.DefaultTensorFormat
    else:
        Image2DPackedTensorFormat.Start(b)
        Image2DPackedTensorFormat.AddAlignAxis(b, t.image_axis)
        fmt = Image2DPackedTensorFormat.End(b)
        fmt_type = TensorFormat.TensorFormat.Image2DPackedTensorFormat
    data, nbytes = None, 0
    if t.data is not None:
        storage = _dt.storage_of(t.dtype)
        raw = np.ascontiguousarray(t.data).view(storage).astype(
            np.dtype(storage).newbyteorder("<"), copy=False).tobytes()
        data, nbytes = _bytes_vector(b, raw), len(raw)
    Tensor.Start(b)
    if name is not None:
        Tensor.AddName(b, name)
    Tensor.AddShape(b, shape)
    Tensor.AddCompNode(b, comp)
    Tensor.AddDtype(b, dtype)
    Tensor.AddFormatType(b, fmt_type)
    Tensor.AddFormat(b, fmt)
    if data is not None:
        Tensor.AddData(b, data)
    return Tensor.End(b), nbytes


def _build_opr(b, opr: _Opr, index: int, options: DumpOptions) -> tuple[int, int]:
    from .generated import Operator
    type_id, version = identity(opr.type)
    tensors, nbytes = [], 0
    for t in opr.tensors:
        off, n = _build_tensor(b, t)
        tensors.append(off)
        nbytes += n
    first, extra_types, extra = build_params(b, opr, Operator)
    type_str = b.CreateString(opr.type)
    name = b.CreateString(opr.name) if options.keep_opr_name else None
    inputs = _uint_vector(b, Operator.StartInputsVector, opr.inputs) if opr.inputs else None
    outputs = _uint_vector(b, Operator.StartOutputsVector, opr.outputs)
    tensors_vec = _offset_vector(b, Operator.StartTensorsVector, tensors) if tensors else None
    out_dtype = _build_dtype(b, opr.output_dtype) if opr.output_dtype else None
    Operator.Start(b)
    Operator.AddType(b, type_str)
    Operator.AddTypeId(b, type_id)
    if name is not None:
        Operator.AddName(b, name)
    if first is not None:
        Operator.AddParamType(b, first[0])
        Operator.AddParam(b, first[1])
    if extra is not None:
        Operator.AddAdditionalParamsType(b, extra_types)
        Operator.AddAdditionalParams(b, extra)
    if inputs is not None:
        Operator.AddInputs(b, inputs)
    Operator.AddOutputs(b, outputs)
    if tensors_vec is not None:
        Operator.AddTensors(b, tensors_vec)
    if out_dtype is not None:
        Operator.AddOutputDtype(b, out_dtype)
    Operator.AddOprVersion(b, version)
    if options.keep_opr_priority:
        source = opr.type in ("Host2DeviceCopy", "ImmutableTensor")
        Operator.AddPriority(b, INT_MIN if source else index)
    return Operator.End(b), nbytes


def build_params(b, opr: _Opr, operator_module) -> tuple:
    """(first param (union type, offset) or None, additional types vector, additional
    params vector): the first param goes to Operator.param, the rest to additional_params
    (both container formats keep this split)."""
    params = [(tables.union_index(tbl), tables.build(b, tbl, f)) for tbl, f in opr.params]
    if len(params) <= 1:
        return (params[0] if params else None), None, None
    operator_module.StartAdditionalParamsTypeVector(b, len(params) - 1)
    for kind, _ in reversed(params[1:]):
        b.PrependUint8(kind)
    types = b.EndVector()
    offsets = _offset_vector(b, operator_module.StartAdditionalParamsVector,
                             [o for _, o in params[1:]])
    return params[0], types, offsets


def user_info_bytes(options: DumpOptions) -> bytes:
    """Metadata.user_info: pickle bytes (MegEngine stores them in a flatbuffer string)."""
    if not options.enable_metadata:
        return b""
    if options.user_info_bytes is not None:
        return options.user_info_bytes
    from megtrace.serialization import dumps
    return dumps(options.user_info)


def build_metadata(b, options: DumpOptions, Metadata=None) -> int:
    """The Metadata table; `Metadata` is the generated module of either container format
    (their fields differ in id order only, which the builder takes care of)."""
    if Metadata is None:
        from .generated import Metadata
    s = b.CreateString(user_info_bytes(options))
    Metadata.Start(b)
    if options.enable_metadata:
        Metadata.AddIsValid(b, True)
        if options.graph_modified:
            Metadata.AddGraphModified(b, True)
        if options.optimize_options:
            Metadata.AddOptimizeOptions(b, options.optimize_options)
    Metadata.AddUserInfo(b, s)
    return Metadata.End(b)
