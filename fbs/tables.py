"""Write and read any param table by name, driven by the schema (schema_info.py).

Fields are given and returned in MegEngine's spelling ("pad_h", "transposeB"); enum
fields accept member names ("ADD") or numbers and are read back as names.
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Any

import flatbuffers

from megtrace.errors import FormatError

from .schema_info import Field, schema

_SCALARS = {"bool", "byte", "ubyte", "short", "ushort", "int", "uint", "long", "ulong",
            "float", "double"}


def generated(name: str):
    return importlib.import_module(f"megtrace.fbs.generated.{name}")


@lru_cache(maxsize=None)
def union_members() -> dict[int, str]:
    cls = generated("OperatorParam").OperatorParam
    return {v: k for k, v in vars(cls).items() if isinstance(v, int) and not k.startswith("_")}


@lru_cache(maxsize=None)
def union_index(name: str) -> int:
    return getattr(generated("OperatorParam").OperatorParam, name)


def _fields_of(table: str) -> tuple[Field, ...]:
    try:
        return schema().tables[table]
    except KeyError:
        raise FormatError(f"param table {table!r} is not in fbs/schema/params.fbs") from None


def _enum_value(enum: str, value: Any) -> int:
    if isinstance(value, str):
        try:
            return schema().enums[enum][value]
        except KeyError:
            raise ValueError(f"{enum}: no member {value!r}") from None
    return int(value)


def build(builder: flatbuffers.Builder, table: str, fields: dict[str, Any]) -> int:
    """Build `table` with `fields` (others left at their schema defaults); return offset.
    The DType table (TypeCvt's param) takes `scale` and `zero_point` for quantized types:
    its LinearQuantizationParam."""
    if table == "DType" and "scale" in fields:
        return _build_quantized_dtype(builder, fields)
    declared = {f.name: f for f in _fields_of(table)}
    unknown = set(fields) - set(declared)
    if unknown:
        raise ValueError(f"{table}: unknown field(s) {sorted(unknown)}")
    mod = generated(table)
    vectors = {}
    for name, value in fields.items():
        f = declared[name]
        if f.type.startswith("["):
            vectors[name] = _build_vector(builder, table, f, value)
    getattr(mod, "Start")(builder)
    for name, value in fields.items():
        f = declared[name]
        add = getattr(mod, f"Add{f.accessor}")
        if name in vectors:
            add(builder, vectors[name])
        elif f.type in schema().enums:
            add(builder, _enum_value(f.type, value))
        elif f.type == "bool":
            add(builder, bool(value))
        elif f.type in ("float", "double"):
            add(builder, float(value))
        else:
            add(builder, int(value))
    return getattr(mod, "End")(builder)


def _build_vector(builder, table: str, f: Field, values) -> int:
    elem = f.type[1:-1]
    mod = generated(table)
    start = getattr(mod, f"Start{f.accessor}Vector")
    values = list(values)
    if elem in schema().structs:
        struct_mod = generated(elem)
        members = schema().structs[elem]
        start(builder, len(values))
        for item in reversed(values):
            args = [_enum_value(m.type, item[m.name]) if m.type in schema().enums
                    else item[m.name] for m in members]
            getattr(struct_mod, f"Create{elem}")(builder, *args)
        return builder.EndVector()
    prepend = {"int": builder.PrependInt32, "uint": builder.PrependUint32}[elem]
    start(builder, len(values))
    for v in reversed(values):
        prepend(int(v))
    return builder.EndVector()


def _build_quantized_dtype(builder, fields: dict[str, Any]) -> int:
    lq, dt = generated("LinearQuantizationParam"), generated("DType")
    lq.Start(builder)
    lq.AddScale(builder, float(fields["scale"]))
    if fields.get("zero_point"):
        lq.AddZeroPoint(builder, int(fields["zero_point"]))
    param = lq.End(builder)
    dt.Start(builder)
    dt.AddType(builder, _enum_value("DTypeEnum", fields["type"]))
    dt.AddParamType(builder, 1)
    dt.AddParam(builder, param)
    return dt.End(builder)


def read(table: str, buf: bytes, pos: int) -> dict[str, Any]:
    """Read every declared field of the table at `pos`; enums come back as names (the
    DType table: its quantization too, as `scale` and `zero_point`)."""
    obj = getattr(generated(table), table)()
    obj.Init(buf, pos)
    out: dict[str, Any] = {}
    if table == "DType" and obj.ParamType() == 1 and obj.Param() is not None:
        lq = generated("LinearQuantizationParam").LinearQuantizationParam()
        lq.Init(obj.Param().Bytes, obj.Param().Pos)
        out["scale"], out["zero_point"] = lq.Scale(), lq.ZeroPoint()
    for f in _fields_of(table):
        if f.type.startswith("["):
            elem = f.type[1:-1]
            n = getattr(obj, f"{f.accessor}Length")()
            least = len(schema().structs[elem]) if elem in schema().structs else 4
            if n < 0 or n * least > len(buf):    # checked before a single item is read
                raise FormatError(f"corrupt model: {table}.{f.name} declares {n} items, more "
                                  f"than the {len(buf)}-byte file can hold")
            items = [getattr(obj, f.accessor)(i) for i in range(n)]
            if elem in schema().structs:
                items = [{m.name: _enum_name(m.type, getattr(it, m.accessor)())
                          for m in schema().structs[elem]} for it in items]
            out[f.name] = items
        elif f.type in _SCALARS or f.type in schema().enums:
            out[f.name] = _enum_name(f.type, getattr(obj, f.accessor)())
    return out


def _enum_name(enum: str, value: Any) -> Any:
    members = schema().enums.get(enum)
    if members is None:
        return value
    for name, v in members.items():
        if v == value:
            return name
    return int(value)
