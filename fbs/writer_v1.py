"""The FBS (V1) container MegEngine writes with dump_format="FBS":

    "MGBC" (u32) | FeatureBits64 (8 zero bytes) | reserved u32 | u64 n = data bytes
    | n bytes of tensor payloads, in opr order | size-prefixed "mgb1" flatbuffer

`compat_older_version="8.14"` writes the "MGBS" variant (no feature bits, unversioned
type ids). Op identity, params and tensors are shared with FBS_V2 (writer.Emitter).
"""
from __future__ import annotations

import struct

import flatbuffers
import numpy as np

from megtrace import dtype as _dt

from .oprs import unversioned_type_id, v1_type_id
from .writer import (COMP_NODE, MGE_VERSION, DumpOptions, Emitter, _build_dtype, _offset_vector,
                     build_metadata, build_params)

MAGIC_V1, MAGIC_V0 = 0x4342474D, 0x5342474D      # "MGBC", "MGBS"


def serialize_v1(em: Emitter, out_ids: list[int], options: DumpOptions,
                 compat_8_14: bool = False) -> tuple[bytes, int]:
    """Container bytes and the content hash (non-zero; the loader asserts it)."""
    from .generated.v1 import Graph
    b = flatbuffers.Builder(1 << 16)
    payloads: list[bytes] = []
    wanted = set(out_ids)
    opr_offsets = [_build_opr(b, opr, index, em, wanted, options, payloads, compat_8_14)
                   for index, opr in enumerate(em.oprs)]
    oprs = _offset_vector(b, Graph.StartOprsVector, opr_offsets)
    from .generated.v1 import OutputVar
    Graph.StartOutputVarsIdxVector(b, len(out_ids))
    for vid in reversed(out_ids):
        OutputVar.CreateOutputVar(b, vid, vid)
    outs = b.EndVector()
    from .generated.v1 import Metadata
    meta = build_metadata(b, options, Metadata)
    data = b"".join(payloads)
    import xxhash
    content_hash = xxhash.xxh64_intdigest(data + repr([o.type for o in em.oprs]).encode(),
                                          20160701) or 1
    Graph.Start(b)
    Graph.AddMgbVersion(b, MGE_VERSION)
    Graph.AddHash(b, content_hash)
    Graph.AddNrSharedTensor(b, sum(o.type == "SharedDeviceTensor" for o in em.oprs))
    Graph.AddOprs(b, oprs)
    Graph.AddOutputVarsIdx(b, outs)
    Graph.AddMetadata(b, meta)
    b.FinishSizePrefixed(Graph.End(b), b"mgb1")
    if compat_8_14:
        header = struct.pack("<IIQ", MAGIC_V0, 0, len(data))
    else:
        header = struct.pack("<IQIQ", MAGIC_V1, 0, 0, len(data))
    return header + data + bytes(b.Output()), content_hash


def _build_opr(b, opr, index, em, wanted, options, payloads, compat_8_14) -> int:
    from .generated.v1 import CompNode, Operator, Tensor
    tensors = []
    for t in opr.tensors:
        if t.image_axis is not None:
            raise NotImplementedError(
                "dump_format='FBS': megtrace writes the Image2DPack4 constants of "
                "enable_hwcd4 in FBS_V2 only (use the default dump_format)")
        name = b.CreateString(t.name) if t.name else None
        Tensor.StartShapeVector(b, len(t.shape))
        for d in reversed(t.shape):
            b.PrependUint32(int(d))
        shape = b.EndVector()
        loc = b.CreateString(t.comp_node or COMP_NODE)
        CompNode.Start(b)
        CompNode.AddLogicalLocator(b, loc)
        comp = CompNode.End(b)
        dtype = _build_dtype(b, t.dtype)
        size = 0
        if t.data is not None:
            storage = _dt.storage_of(t.dtype)
            raw = np.ascontiguousarray(t.data).view(storage).astype(
                np.dtype(storage).newbyteorder("<"), copy=False).tobytes()
            payloads.append(raw)
            size = len(raw)
        Tensor.Start(b)
        if name is not None:
            Tensor.AddName(b, name)
        Tensor.AddShape(b, shape)
        Tensor.AddCompNode(b, comp)
        Tensor.AddDtype(b, dtype)
        if t.data is not None:
            Tensor.AddDataSize(b, size)
        tensors.append(Tensor.End(b))
    first, extra_types, extra = build_params(b, opr, Operator)
    names = None
    if options.keep_var_name >= 2 or (options.keep_var_name == 1 and wanted & set(opr.outputs)):
        strings = [b.CreateString(em.names[i]) for i in opr.outputs]
        names = _offset_vector(b, Operator.StartOutputNameVector, strings)
    inputs = None
    if opr.inputs:
        Operator.StartInputsVector(b, len(opr.inputs))
        for i in reversed(opr.inputs):
            b.PrependUint32(i)
        inputs = b.EndVector()
    tensors_vec = _offset_vector(b, Operator.StartTensorsVector, tensors) if tensors else None
    opr_name = b.CreateString(opr.name) if options.keep_opr_name else None
    out_dtype = _build_dtype(b, opr.output_dtype) if opr.output_dtype else None
    Operator.Start(b)
    Operator.AddTypeId(b, unversioned_type_id(opr.type) if compat_8_14 else v1_type_id(opr.type))
    if first is not None:
        Operator.AddParamType(b, first[0])
        Operator.AddParam(b, first[1])
    if inputs is not None:
        Operator.AddInputs(b, inputs)
    if names is not None:
        Operator.AddOutputName(b, names)
    if tensors_vec is not None:
        Operator.AddTensors(b, tensors_vec)
    if out_dtype is not None:
        Operator.AddOutputDtype(b, out_dtype)
    if options.keep_opr_priority:
        source = opr.type in ("Host2DeviceCopy", "ImmutableTensor")
        Operator.AddPriority(b, -2147483648 if source else index)
    if extra is not None:
        Operator.AddAdditionalParamsType(b, extra_types)
        Operator.AddAdditionalParams(b, extra)
    if opr_name is not None:
        Operator.AddName(b, opr_name)
    return Operator.End(b)
