"""The type rule of quantized values through the ordinary ops: which dtype (scale, zero
point) a result has when an input is quantized, the same for eager runs, traces and
loaded graphs (`OpDef.infer_types` applies it). Arithmetic follows
megtrace/ops/quantized_eager.py; this module only says what comes out, and which of the
ops a compiled graph (TVM) can run on quantized values."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..dtype import QuantParam
from ..errors import UnsupportedOpError
from ..ir import TensorType
from . import quantized_eager as Q

# ops whose Relax lowering computes on quantized storage exactly as eager does: moving
# values, integer arithmetic with C wrap-around, max pooling, nearest resizing, and the
# ops whose lowering reads the quantization (average pooling, matmul)
# ops that read only the shape of their input (their result is a plain int32 shape)
SHAPE_OPS = frozenset({"get_shape", "shape_of"})
COMPILED = (Q.LAYOUT_OPS - {"sliding_window"}) | Q.INTEGER_OPS | Q.POOL_OPS | SHAPE_OPS | \
    {"resize", "matmul"}


def refusal(name: str, quant: QuantParam) -> UnsupportedOpError:
    return UnsupportedOpError(
        f"{name} on quantized dtype {quant.name}: MegEngine has no such kernel; dequantize "
        "with astype('float32') first (or use the quantized functionals: "
        "F.quantized.conv_bias_activation, _elemwise_multi_type)")


def _same(name: str, quants: Sequence[QuantParam]) -> QuantParam:
    first = quants[0]
    Q.same_dtype(name, [q.np_dtype() for q in quants])   # MegEngine's promotion errors
    return first


def propagate(name: str, types: Sequence[TensorType], kwargs: dict,
              outs: tuple) -> tuple:
    """`outs` (the op's shape rule on the storage dtypes) with the quantization each
    result has; raises for ops MegEngine has no quantized kernel for."""
    if name in SHAPE_OPS:
        return outs
    quants = [t.quant for t in types if getattr(t, "quant", None) is not None]
    if name == "matmul" and len(quants) == 2 and len(types) == 2:
        q = QuantParam("QuantizedS32",
                       float(np.float32(quants[0].scale) * np.float32(quants[1].scale)))
        return tuple(TensorType(o.shape, "int32", q) for o in outs)
    keeps = name in Q.LAYOUT_OPS or name in Q.POOL_OPS or \
        (name == "resize" and kwargs.get("mode") == "nearest")
    if not keeps and (name in Q.INTEGER_OPS or
                      (name == "reduce" and kwargs.get("mode") in ("sum", "max", "min"))):
        if len(quants) != len(types):
            raise TypeError(f"{name}: MegEngine does not mix quantized and non-quantized "
                            "inputs; convert with astype first")
        keeps = True
    if not keeps:
        raise refusal(name, quants[0])
    q = _same(name, quants)
    return tuple(TensorType(o.shape, o.dtype, q) if o.dtype == q.storage else o for o in outs)
