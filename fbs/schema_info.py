"""What the schema says about each param table: field names, types and enum members.

Read from megtrace.fbs/schema/dtype.fbs and params.fbs (the one source of truth), so the generic table writer
and reader in tables.py need no second list of fields.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
SCHEMA_FILES = ("dtype.fbs", "params.fbs")


@dataclass(frozen=True)
class Field:
    name: str           # as spelled in the schema (MegEngine's spelling)
    type: str           # "uint", "bool", "[int]", an enum or struct name
    accessor: str       # generated method name, e.g. PadH


@dataclass(frozen=True)
class Schema:
    tables: dict[str, tuple[Field, ...]]
    enums: dict[str, dict[str, int]]
    structs: dict[str, tuple[Field, ...]]


def accessor_name(field: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field.split("_"))


def _fields(body: str) -> tuple[Field, ...]:
    out = []
    for m in re.finditer(r"(\w+)\s*:\s*([\w\[\]:]+)\s*(?:=\s*[^;]+)?;", body):
        out.append(Field(m.group(1), m.group(2), accessor_name(m.group(1))))
    return tuple(out)


@lru_cache(maxsize=None)
def schema() -> Schema:
    text = "\n".join(re.sub(r"//[^\n]*", "", (SCHEMA_DIR / f).read_text())
                     for f in SCHEMA_FILES)
    tables = {m.group(1): _fields(m.group(2))
              for m in re.finditer(r"\btable\s+(\w+)\s*\{([^}]*)\}", text)}
    structs = {m.group(1): _fields(m.group(2))
               for m in re.finditer(r"\bstruct\s+(\w+)\s*\{([^}]*)\}", text)}
    enums = {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)\s*=\s*(\d+)", m.group(2))}
             for m in re.finditer(r"\benum\s+(\w+)\s*:\s*\w+\s*\{([^}]*)\}", text)}
    return Schema(tables, enums, structs)
