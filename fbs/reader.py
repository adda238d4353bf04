"""MegEngine FBS_V2 bytes -> `ModelFile` (inputs, oprs with decoded params, outputs).

The flatbuffers runtime does not verify buffers, so everything it reads is checked here:
framing, identifier, and every offset and length against the buffer, so that a corrupt
file raises `FormatError` instead of crashing or allocating gigabytes.
"""
from __future__ import annotations

import pickle
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from megtrace import dtype as _dt
from megtrace import safe_pickle
from megtrace.errors import FormatError, UnsupportedModelError

from . import tables
from .oprs import identity, name_of

FBS_V1_MAGICS = {0x4342474D: "FBS (MGBC)", 0x5342474D: "FBS (MGBS, 8.14 compatible)"}
TESTCASE_MAGIC = b"mgbtest0"


@dataclass
class TensorValue:
    name: str | None
    shape: tuple[int, ...]
    dtype: str | _dt.QuantParam        # quantized dtypes: their QuantParam
    data: np.ndarray | None
    image_axis: int | None = None    # Image2DPack4 format's align axis (NHWCD4 constants)


@dataclass
class Opr:
    type: str
    params: list[tuple[str, dict[str, Any]]]
    inputs: list[int]
    outputs: list[int]
    tensors: list[TensorValue]
    name: str | None = None
    # OperatorNodeConfig's output dtype, where written (a QuantParam for quantized dtypes)
    output_dtype: str | _dt.QuantParam | None = None


@dataclass
class Metadata:
    is_valid: bool = False
    graph_modified: bool = False
    optimize_options: int = 0
    user_info_bytes: bytes = b""

    def user_info(self, *, weights_only: bool = True) -> Any:
        """Unpickle `user_info`: plain data only unless `weights_only=False` (a pickle
        can run code; use that only on files you trust)."""
        if not self.user_info_bytes:
            return None
        if weights_only:
            return safe_pickle.loads(self.user_info_bytes, what="user_info")
        return pickle.loads(self.user_info_bytes)


@dataclass
class ModelFile:
    oprs: list[Opr]
    output_ids: list[int]
    names: dict[int, str] = field(default_factory=dict)
    metadata: Metadata = field(default_factory=Metadata)
    mge_version: int = 0
    model_version: int = 0

    @property
    def inputs(self) -> list[TensorValue]:
        found = [o.tensors[0] for o in self.oprs if o.type == "Host2DeviceCopy" and o.tensors]
        if any(not t.name for t in found) or len({t.name for t in found}) != len(found):
            raise FormatError("Host2DeviceCopy inputs need unique, non-empty names")
        return found

    def output_names(self) -> list[str]:
        return [self.names.get(i, f"unnamed{k}") for k, i in enumerate(self.output_ids)]

    def input_names_by_dependency(self, output_ids: list[int] | None = None) -> list[str]:
        """The inputs the outputs depend on, breadth first from the outputs with each
        opr's inputs in order: MegEngine's cgtools.get_dep_vars, whose order
        GraphInference gives positional inputs (not the traced function's order)."""
        owner = {v: o for o in self.oprs for v in o.outputs}
        queue = deque(self.output_ids if output_ids is None else output_ids)
        seen: set[int] = set()
        names = []
        while queue:
            var = queue.popleft()
            if var in seen or var not in owner:
                continue
            seen.add(var)
            opr = owner[var]
            queue.extend(opr.inputs)
            if opr.type == "Host2DeviceCopy" and opr.tensors:
                names.append(opr.tensors[0].name)
        return names


def detect_format(buf: bytes) -> str:
    if len(buf) >= 8 and buf[:8] == TESTCASE_MAGIC:
        return "mgbtest0"
    if len(buf) >= 8 and struct.unpack_from("<I", buf)[0] in FBS_V1_MAGICS and \
            struct.unpack_from("<I", buf, 4)[0] == 0:
        return FBS_V1_MAGICS[struct.unpack_from("<I", buf)[0]]
    if len(buf) >= 12 and buf[8:12] == b"mgv2":
        return "FBS_V2"
    return "unknown"


def read_model(buf: bytes) -> ModelFile:
    """Parse one FBS_V2 model; raises FormatError naming what is wrong."""
    buf = bytes(buf)
    kind = detect_format(buf)
    if kind.startswith("FBS ("):
        from .reader_v1 import read_model_v1
        return read_model_v1(buf)
    if kind != "FBS_V2":
        if kind == "unknown":
            raise FormatError(f"not a MegEngine model: {len(buf)} bytes starting with "
                              f"{buf[:12]!r}; expected an FBS_V2 model (identifier 'mgv2' at "
                              "byte 8) or an FBS one ('MGBC' header)")
        raise FormatError(f"{kind}: use load_graph, which reads testcase containers")
    size = struct.unpack_from("<I", buf)[0]
    if size > len(buf) - 4:
        raise FormatError(f"truncated model: size prefix says {size} bytes, the file holds "
                          f"{len(buf) - 4} after it")
    # bytes after the model are not read, as MegEngine's loader reads one model off a
    # stream (dump(append=True) puts several in one file; a shorter dump over a longer one)
    buf = buf[:size + 4]
    try:
        return _read(buf)
    except FormatError:
        raise
    except Exception as e:  # the flatbuffers runtime trusts offsets; any slip is corruption
        raise FormatError(f"corrupt model: {type(e).__name__}: {e}") from None


class _Checker:
    def __init__(self, buf: bytes):
        self.n = len(buf)

    def vec(self, what: str, length: int, elem: int) -> int:
        if length < 0 or length * elem > self.n:
            raise FormatError(f"corrupt model: {what} declares {length} elements, more than "
                              f"the {self.n}-byte file can hold")
        return length


def _read(buf: bytes) -> ModelFile:
    from .generated import Model
    chk = _Checker(buf)
    model = Model.Model.GetRootAs(buf, 4)
    if model.OprsIsNone():
        raise FormatError("corrupt model: the Model table has no oprs (a required field)")
    oprs, seen = [], set()
    for i in range(chk.vec("oprs", model.OprsLength(), 4)):
        op = model.Oprs(i)
        # Every opr is its own table; a file that points many entries at one table
        # would make a tiny file cost as much as a huge one to load.
        if op._tab.Pos in seen:
            raise FormatError(f"corrupt model: opr {i} reuses the table of an earlier opr")
        seen.add(op._tab.Pos)
        oprs.append(_read_opr(op, buf, chk))
    names = {}
    for i in range(chk.vec("middle_tensors", model.MiddleTensorsLength(), 4)):
        name = model.MiddleTensors(i).Name()
        if name is not None:
            names[i] = name.decode("utf-8", "replace")
    outs = [model.OutputVarsIdx(i).CompactId()
            for i in range(chk.vec("output_vars_idx", model.OutputVarsIdxLength(), 4))]
    for i in range(chk.vec("output_alias", model.OutputAliasLength(), 4)):
        alias = model.OutputAlias(i)
        if alias.Name():
            names[alias.Id()] = alias.Name().decode("utf-8", "replace")
    meta = Metadata()
    m = model.Metadata()
    if m is not None:
        meta = Metadata(m.IsValid(), m.GraphModified(), m.OptimizeOptions(), m.UserInfo() or b"")
    return ModelFile(oprs, outs, names, meta, model.MgeVersion(), model.ModelVersion())


def _read_opr(op, buf: bytes, chk: _Checker) -> Opr:
    type_id, version = op.TypeId(), op.OprVersion()
    type_name = name_of(type_id, version)
    if type_name is None:
        shown = (op.Type() or b"?").decode("utf-8", "replace")
        if op.Type() and identity(shown) == (type_id, version):   # a real MegEngine opr
            raise UnsupportedModelError(f"operator {shown!r} is a MegEngine 1.13 operator "
                                        "megtrace does not implement")
        raise FormatError(f"unknown operator {shown!r} (type_id {type_id}, opr_version "
                          f"{version}): megtrace cannot read it")
    params = []
    members = tables.union_members()
    if op.ParamType():
        params.append(_read_param(members, op.ParamType(), op.Param(), buf))
    n_extra = chk.vec("additional_params", op.AdditionalParamsLength(), 4)
    for j in range(n_extra):
        slot = op.AdditionalParams(j)
        params.append(_read_param(members, op.AdditionalParamsType(j), slot._tab, buf))
    inputs = [op.Inputs(j) for j in range(chk.vec("inputs", op.InputsLength(), 4))]
    outputs = [op.Outputs(j) for j in range(chk.vec("outputs", op.OutputsLength(), 4))]
    tensors = [_read_tensor(op.Tensors(j), chk)
               for j in range(chk.vec("tensors", op.TensorsLength(), 4))]
    name = op.Name().decode("utf-8", "replace") if op.Name() else None
    return Opr(type_name, params, inputs, outputs, tensors, name, _output_dtype(op))


def _output_dtype(op) -> str | _dt.QuantParam | None:
    dt = op.OutputDtype()
    if dt is None:
        return None
    return read_dtype(dt, "output dtype")


def read_dtype(dt, what: str) -> str | _dt.QuantParam:
    """A DType table (absent: float32) as a dtype name, or a QuantParam for MegEngine's
    quantized dtypes (their LinearQuantizationParam)."""
    enum = dt.Type() if dt is not None else 0
    if enum not in _dt.BY_MGE_ENUM and enum not in _dt.BY_QUANT_ENUM:
        raise FormatError(f"{what} {enum} (MegEngine DTypeEnum) is not supported")
    scale = zero_point = None
    if enum in _dt.BY_QUANT_ENUM and dt.ParamType() == 1 and dt.Param() is not None:
        from .generated.LinearQuantizationParam import LinearQuantizationParam
        lq = LinearQuantizationParam()
        lq.Init(dt.Param().Bytes, dt.Param().Pos)
        scale, zero_point = lq.Scale(), lq.ZeroPoint()
    try:
        return _dt.read_file_dtype(enum, scale, zero_point or 0)
    except Exception as e:
        raise FormatError(f"{what}: {e}") from None


def _read_param(members: dict[int, str], kind: int, tab, buf: bytes) -> tuple[str, dict]:
    table = members.get(kind)
    if table is None:
        raise FormatError(f"corrupt model: unknown param type {kind}")
    if tab is None:
        raise FormatError(f"corrupt model: param {table} has no table")
    return table, tables.read(table, buf, tab.Pos)


def tensor_header(t, chk: _Checker) -> tuple[str | None, tuple[int, ...], str, int]:
    """(name, shape, dtype, bytes its data must have) of a Tensor table (both formats)."""
    shape = tuple(t.Shape(j) for j in range(chk.vec("tensor shape", t.ShapeLength(), 4)))
    dtype = read_dtype(t.Dtype(), "tensor dtype")
    if isinstance(dtype, _dt.QuantParam) and dtype.name in ("QuantizedS4", "Quantized4Asymm",
                                                             "QuantizedS1"):
        raise UnsupportedModelError(f"tensor dtype {dtype.name}: megtrace does not read "
                                    "MegEngine's packed 4-bit/1-bit tensors")
    name = t.Name().decode("utf-8", "replace") if t.Name() else None
    return name, shape, dtype, int(np.prod(shape, dtype=object)) * \
        np.dtype(_dt.storage_of(dtype)).itemsize


def _read_tensor(t, chk: _Checker) -> TensorValue:
    name, shape, dtype, expected = tensor_header(t, chk)
    data = None
    if not t.DataIsNone():
        n = chk.vec("tensor data", t.DataLength(), 1)
        if n != expected:
            raise FormatError(f"tensor {name or ''} {shape} {dtype} needs {expected} bytes of "
                              f"data, the file holds {n}")
        raw = t.DataAsNumpy()
        storage = _dt.storage_of(dtype)
        data = np.frombuffer(raw.tobytes(), dtype=np.dtype(storage).newbyteorder("<"))
        data = data.astype(storage).reshape(shape)
        if isinstance(dtype, _dt.QuantParam):
            data = data.view(dtype.np_dtype())
    return TensorValue(name, shape, dtype, data, _image_axis(t))


def _image_axis(t) -> int | None:
    from .generated.Image2DPackedTensorFormat import Image2DPackedTensorFormat
    from .generated.TensorFormat import TensorFormat
    if t.FormatType() != TensorFormat.Image2DPackedTensorFormat or t.Format() is None:
        return None
    fmt = Image2DPackedTensorFormat()
    fmt.Init(t.Format().Bytes, t.Format().Pos)
    return fmt.AlignAxis()
