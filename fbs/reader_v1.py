"""FBS (V1, "MGBC"/"MGBS") bytes -> `ModelFile`, the same description FBS_V2 gives.

V1 oprs carry no output list: ids are implicit, one per non-volatile output of each
opr in order, so the reader needs each opr's output count (`output_count`).
"""
from __future__ import annotations

import struct

import numpy as np

from megtrace import dtype as _dt

from megtrace.errors import FormatError

from . import tables
from .oprs import name_of_v1
from .reader import Metadata, ModelFile, Opr, TensorValue, _Checker, _output_dtype, tensor_header

MAGIC_V1, MAGIC_V0 = 0x4342474D, 0x5342474D


def output_count(opr_type: str, params: list, n_tensors: int, n_inputs: int) -> int:
    from .to_graph import spec_index
    if opr_type == "MultipleDeviceTensorHolder":
        return n_tensors
    if opr_type == "TopK":
        return 1 if params and params[0][1].get("mode") == "KTH_ONLY" else 2
    if opr_type == "Split":
        return max(n_inputs - 1, 1)
    if opr_type in ("LayerNorm", "GeneralNorm"):
        return 3
    if opr_type == "MultiHeadAttn":     # out, attn_weight and the two reserve spaces
        return 4
    specs = spec_index().get(opr_type, ())
    return max((s.outputs for _, s in specs), default=1)


def read_model_v1(buf: bytes) -> ModelFile:
    try:
        return _read(bytes(buf))
    except FormatError:
        raise
    except Exception as e:
        raise FormatError(f"corrupt FBS model: {type(e).__name__}: {e}") from None


def _read(buf: bytes) -> ModelFile:
    from .generated.v1 import Graph
    if len(buf) < 16:
        raise FormatError(f"FBS model: {len(buf)} bytes is too short for the header")
    magic = struct.unpack_from("<I", buf)[0]
    if magic == MAGIC_V1:
        pos = 16
    elif magic == MAGIC_V0:
        pos = 8
    else:
        raise FormatError("not an FBS (MGBC/MGBS) model")
    if len(buf) < pos + 8:
        raise FormatError("FBS model: truncated header")
    n_data = struct.unpack_from("<Q", buf, pos)[0]
    data_start = pos + 8
    fb_start = data_start + n_data
    if fb_start + 12 > len(buf):
        raise FormatError(f"FBS model: the header declares {n_data} bytes of tensor data, the "
                          f"file has {len(buf) - data_start}")
    size = struct.unpack_from("<I", buf, fb_start)[0]
    if fb_start + 4 + size != len(buf):
        raise FormatError(f"FBS model: the flatbuffer declares {size} bytes, "
                          f"{len(buf) - fb_start - 4} follow")
    if buf[fb_start + 8:fb_start + 12] != b"mgb1":
        raise FormatError("FBS model: missing the 'mgb1' identifier")
    fb = buf[fb_start:]
    chk = _Checker(fb)
    graph = Graph.Graph.GetRootAs(fb, 4)
    if graph.Hash() == 0:
        raise FormatError("FBS model: the graph hash is 0 (MegEngine refuses such files)")
    cursor = data_start
    oprs, names, next_id = [], {}, 0
    members = tables.union_members()
    seen: set[int] = set()
    for i in range(chk.vec("oprs", graph.OprsLength(), 4)):
        op = graph.Oprs(i)
        if op._tab.Pos in seen:      # see reader._read: one table per opr
            raise FormatError(f"corrupt model: opr {i} reuses the table of an earlier opr")
        seen.add(op._tab.Pos)
        type_name = name_of_v1(op.TypeId())
        if type_name is None:
            raise FormatError(f"unknown operator type_id {op.TypeId()} in FBS model")
        params = []
        if op.ParamType():
            params.append((members[op.ParamType()], tables.read(members[op.ParamType()], fb,
                                                                op.Param().Pos)))
        for j in range(chk.vec("additional_params", op.AdditionalParamsLength(), 4)):
            kind = op.AdditionalParamsType(j)
            params.append((members[kind], tables.read(members[kind], fb,
                                                      op.AdditionalParams(j)._tab.Pos)))
        tensors = []
        for j in range(chk.vec("tensors", op.TensorsLength(), 4)):
            value, cursor = _tensor(op.Tensors(j), buf, cursor, fb_start, chk)
            tensors.append(value)
        inputs = [op.Inputs(j) for j in range(chk.vec("inputs", op.InputsLength(), 4))]
        n_out = output_count(type_name, params, len(tensors), len(inputs))
        outputs = list(range(next_id, next_id + n_out))
        next_id += n_out
        for j in range(min(op.OutputNameLength(), n_out)):
            names[outputs[j]] = op.OutputName(j).decode("utf-8", "replace")
        name = op.Name().decode("utf-8", "replace") if op.Name() else None
        oprs.append(Opr(type_name, params, inputs, outputs, tensors, name, _output_dtype(op)))
    outs = [graph.OutputVarsIdx(i).CompactId()
            for i in range(chk.vec("output_vars_idx", graph.OutputVarsIdxLength(), 8))]
    m = graph.Metadata()
    meta = Metadata(m.IsValid(), m.GraphModified(), m.OptimizeOptions(), m.UserInfo() or b"") \
        if m is not None else Metadata()
    return ModelFile(oprs, outs, names, meta, graph.MgbVersion(), 1)


def _tensor(t, buf: bytes, cursor: int, end: int, chk) -> tuple[TensorValue, int]:
    name, shape, dtype, expected = tensor_header(t, chk)
    size = t.DataSize()
    if not size:
        return TensorValue(name, shape, dtype, None), cursor
    cursor += t.Offset()
    if size != expected or cursor + size > end:
        raise FormatError(f"tensor {name or ''} {shape} {dtype}: data size {size} does not fit "
                          f"(expected {expected} bytes at offset {cursor})")
    storage = _dt.storage_of(dtype)
    data = np.frombuffer(buf, dtype=np.dtype(storage).newbyteorder("<"),
                         count=int(np.prod(shape)), offset=cursor).astype(storage).reshape(shape)
    if isinstance(dtype, _dt.QuantParam):
        data = data.view(dtype.np_dtype())
    return TensorValue(name, shape, dtype, data), cursor + size
