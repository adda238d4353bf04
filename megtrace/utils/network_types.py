"""Which MegEngine operator (type and param fields) the .mge writer writes a megtrace op
as: what a Network's OpNode shows as `type` and `params`. Asked of the writer itself
(fbs/writer.py), so the view and the file cannot disagree."""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import UnsupportedOpError
from ..ir import TensorType
from ..ops import MgeComposite, OpDef

# network_node imports this module on first use (the writer loads flatbuffers)
from megtrace.fbs.writer import Emitter, _spec_for


class _Probe:
    """A stand-in for an IR node (`op`, `inputs` with types) for the writer's spec choice."""

    class _V:
        def __init__(self, t: TensorType):
            self.type = t

    def __init__(self, op: OpDef, types: Sequence[TensorType]):
        self.op = op
        self.inputs = [self._V(t) for t in types]


def mge_operator(op: OpDef, kwargs: dict, types: Sequence[TensorType]) -> tuple[str, dict[str, Any]]:
    """(serialized MegEngine type, param fields) of the opr that computes `op`'s result;
    for ops written as several oprs, the last one (the one producing the result)."""
    spec = _spec_for(_Probe(op, types))
    if spec is None:
        raise UnsupportedOpError(f"{op.name}({', '.join(map(str, types))}): no MegEngine "
                                 "operator for it")
    if not isinstance(spec, MgeComposite):
        return spec.type, _plain(spec.fields_for(kwargs))
    em = Emitter()
    ids = [em.input(f"in{i}", t) for i, t in enumerate(types)]
    out = spec.emit(em, list(types), kwargs, ids)
    out = out[0] if isinstance(out, (list, tuple)) else out
    for opr in reversed(em.oprs):
        if out in opr.outputs:
            return opr.type, _plain(opr.params[0][1] if opr.params else {})
    return op.name, {}


def _plain(fields: dict) -> dict[str, Any]:
    """Param fields as MegEngine's OpNode.params show them (JSON-like values; enum names
    as MegEngine spells them: the schema's "MAX_" is MegEngine's "MAX")."""
    out = {}
    for k, v in fields.items():
        if isinstance(v, tuple):
            v = list(v)
        elif isinstance(v, str) and v.endswith("_"):
            v = v[:-1]
        out[k] = v
    return out
