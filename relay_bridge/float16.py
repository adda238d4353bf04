"""MegEngine's ConvertF32ToF16Pass on a megtrace graph (optimize_for_inference's
enable_io16xc32 and enable_ioc16), run on the graph lifted back from Relax.

Every float32 tensor becomes float16: float32 inputs get a TypeCvt right after them,
float32 constants are stored as float16, `astype(float32)` becomes `astype(float16)`,
and every other op keeps its params and takes its new input dtypes. With float32
compute (io16xc32) Convolution, ConvBias and MatrixMul get compute_mode=FLOAT32 and
Reduce data_type=FLOAT_O16xC32. Outputs whose dtype changed get a TypeCvt back to the
dtype they had, so the file's outputs keep their dtypes (MegEngine's last step)."""
from __future__ import annotations

import numpy as np

from megtrace.errors import DTypeError, MegtraceError
from megtrace.ir import Graph, Var
from megtrace.ops import get

F32_COMPUTE_OPS = ("conv2d", "conv_bias", "matmul")


def _params_f16(node, f32_compute: bool) -> dict:
    params = dict(node.kwargs)
    name = node.op.name
    if name == "astype" and np.dtype(params["dtype"]) == np.float32:
        params["dtype"] = "float16"
    elif f32_compute and name in F32_COMPUTE_OPS:
        params["compute_mode"] = "FLOAT32"
    elif f32_compute and name == "reduce" and node.inputs[0].type.dtype == "float32":
        params["data_type"] = "FLOAT_O16xC32"
    return params


def convert_f32_to_f16(graph: Graph, *, f32_compute: bool) -> Graph:
    """The graph computing in float16 (float32 sums in convolutions, matrix products and
    reductions when `f32_compute`); inputs and outputs keep their dtypes."""
    astype = get("astype")
    new = Graph(list(graph.inputs), {}, [], [], list(graph.input_names))
    remap: dict[Var, Var] = {}
    for var in graph.inputs:
        if var.type.dtype == "float32":
            (remap[var],) = new.add_node(astype, [var], {"dtype": "float16"}, var.name_hint)
    for var, value in graph.consts.items():
        if value.dtype == np.float32:
            remap[var] = new.add_const(value.astype(np.float16), var.name_hint)
        else:
            new.consts[var] = value
    for node in graph.nodes:
        ins = [remap.get(v, v) for v in node.inputs]
        try:
            outs = new.add_node(node.op, ins, _params_f16(node, f32_compute),
                                node.outputs[0].name_hint)
        except (MegtraceError, ValueError) as e:
            raise DTypeError(f"float16 (enable_io16xc32/enable_ioc16): {node.op.name} "
                                     f"does not take float16 inputs: {e}") from e
        remap.update(zip(node.outputs, outs))
    outputs = []
    for var in graph.outputs:
        out = remap.get(var, var)
        if out.type.dtype != var.type.dtype:
            (out,) = new.add_node(astype, [out], {"dtype": var.type.dtype}, var.name_hint)
        outputs.append(out)
    new.set_outputs(outputs, graph.output_names)
    return new.prune()
