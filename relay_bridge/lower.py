"""megtrace Graph -> Relax IRModule, one `OpDef.lower` per node (a converter table that
is the op registry itself)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from megtrace.errors import UnsupportedOpError
from megtrace.ir import Graph, TensorType
from megtrace.ops.quantized_types import COMPILED

from ._tvm import relax


@dataclass
class LowerContext:
    """What an op's `lower` receives besides its Relax arguments."""

    R: Any                      # tvm.relax.op
    types: list[TensorType]     # input types
    out: TensorType             # (first) result type
    outs: list[TensorType] = None   # every result type
    bb: Any = None                  # the BlockBuilder (normalize gives sub-expressions types)

    def normalize(self, expr):
        """`expr` with its type filled in, for lowerings that build on an intermediate
        (Relax reshape checks element counts, so it needs a typed input for 0-size tensors)."""
        return self.bb.normalize(expr) if self.bb is not None else expr

    def const(self, value, dtype: str):
        import numpy as np
        return relax().const(np.asarray(value, dtype=dtype), dtype)


def to_relax(graph: Graph, func_name: str = "main"):
    """Build an IRModule whose `main` takes the graph inputs and returns a tuple of outputs."""
    rx = relax()
    missing = sorted({n.op.name for n in graph.nodes if n.op.lower is None})
    if missing:
        raise UnsupportedOpError(f"to_relax: no Relax lowering for {', '.join(missing)}")
    bb = rx.BlockBuilder()
    params = [rx.Var(name, rx.TensorType(v.type.shape, v.type.dtype))
              for v, name in zip(graph.inputs, _safe_names(graph.input_names))]
    env = dict(zip(graph.inputs, params))
    with bb.function(func_name, params):
        with bb.dataflow():
            for var, value in graph.consts.items():     # quantized: the stored integers
                env[var] = rx.const(np.asarray(value).view(var.type.dtype), var.type.dtype)
            for node in graph.nodes:
                env.update(zip(node.outputs, emit_node(bb, node, [env[v] for v in node.inputs])))
            out = bb.emit_output(rx.Tuple([env[v] for v in graph.outputs]))
        bb.emit_func_output(out)
    return bb.get()


def emit_node(bb, node, args: list) -> list:
    """Emit `node.op.lower(...)` of Relax `args` into `bb`; one Relax var per output."""
    rx = relax()
    check_quantized(node)
    ctx = LowerContext(rx.op, [v.type for v in node.inputs], node.outputs[0].type,
                       [v.type for v in node.outputs], bb)
    try:
        expr = node.op.lower(ctx, *args, **node.kwargs)
    except Exception as e:
        e.add_note(f"while lowering {node.op.name} with inputs "
                   f"{[str(t) for t in ctx.types]}")
        raise
    if isinstance(expr, (tuple, list)):     # one Relax expression per output
        return [bb.emit(e) for e in expr]
    if len(node.outputs) == 1:
        return [bb.emit(expr)]
    tup = bb.emit(expr)                 # a tuple-valued op (topk): one var per field
    return [bb.emit(rx.TupleGetItem(tup, i)) for i in range(len(node.outputs))]


def check_quantized(node) -> None:
    """Refuse, naming op and dtype, an op on quantized values whose Relax lowering would
    not compute MegEngine's integers (its lowering reads the storage as plain integers)."""
    if node.op.quantized:
        return
    for v in node.inputs:
        q = v.type.quant
        if q is not None and (node.op.name not in COMPILED or
                              (node.op.name == "resize" and node.kwargs.get("mode") != "nearest")):
            raise UnsupportedOpError(
                f"{node.op.name} on quantized dtype {q.name} (scale {q.scale}) cannot be "
                "compiled: megtrace runs it eagerly only; dequantize with "
                "astype('float32') first")


def _safe_names(names: list[str]) -> list[str]:
    return [("v_" + "".join(c if c.isalnum() else "_" for c in n)) or f"arg{i}"
            for i, n in enumerate(names)]
