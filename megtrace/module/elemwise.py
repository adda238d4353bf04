"""`Elemwise`: a module applying one of MegEngine's Elemwise modes ("add", "h_swish",
"fuse_add_relu", ...) to its inputs."""
from __future__ import annotations

from functools import lru_cache

from .. import functional as F
from ..dispatch import apply
from ..functional._convert import binary_operands
from ..ops import MgeOpr, all_ops
from .module import Module


@lru_cache(maxsize=None)
def _ops_by_mode() -> dict[str, str]:
    """MegEngine Elemwise mode -> megtrace op name, from the ops' own declarations."""
    table: dict[str, str] = {}
    for op in all_ops():
        spec = op.mge
        if isinstance(spec, MgeOpr) and spec.type == "Elemwise" and "mode" in spec.match:
            table.setdefault(spec.match["mode"], op.name)
    return table


def elemwise(mode: str, *inputs):
    """Apply Elemwise `mode` (case-insensitive; "max"/"min" as MegEngine spells them)."""
    key = str(mode).upper()
    table = _ops_by_mode()
    name = table.get(key) or table.get(key + "_")
    if name is None:
        raise ValueError(f"Elemwise: unknown mode {mode!r}; known modes are "
                         f"{sorted(m.rstrip('_').lower() for m in table)}")
    fn = getattr(F, name, None)
    if fn is not None:
        return fn(*inputs)
    if len(inputs) == 2:
        return apply(name, *binary_operands(*inputs))
    return apply(name, *inputs)


class Elemwise(Module):
    """`Elemwise("add")(x, y)` is `F.add(x, y)`; `method` is MegEngine's mode name."""

    def __init__(self, method: str, **kwargs):
        super().__init__(**kwargs)
        self.method = method

    def forward(self, *inps):
        return elemwise(self.method, *inps)
