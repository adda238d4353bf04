"""A file whose params ask for what megtrace does not compute is refused, naming the opr
and the field, instead of running differently from MegEngine."""
import numpy as np
import pytest

from megtrace.fbs.reader import read_model
from megtrace.fbs.to_graph import build_graph
from megtrace.fbs.writer import DumpOptions, emit_graph, serialize
from megtrace.errors import UnsupportedModelError
from megtrace.ir import Graph, TensorType
from megtrace.ops import get

F32 = "float32"


def _graph(op: str, shapes, params=None, consts=()) -> Graph:
    g = Graph()
    ins = [g.add_const(np.ones(s, F32)) if i in consts else g.add_input(TensorType(s, F32), f"x{i}")
           for i, s in enumerate(shapes)]
    outs = g.add_node(get(op), ins, params or {})
    g.set_outputs(outs[:1], ["y"])
    return g


GRAPHS = {
    "conv2d": lambda: _graph("conv2d", [(1, 2, 5, 5), (3, 2, 3, 3)], consts=(1,)),
    "pool2d": lambda: _graph("pool2d", [(1, 2, 4, 4)], {"mode": "max", "kernel": (2, 2),
                                                         "stride": (2, 2), "padding": (0, 0)}),
    "matmul": lambda: _graph("matmul", [(2, 3), (3, 4)]),
    "batch_norm": lambda: _graph("batch_norm", [(1, 2, 3, 3)] + [(1, 2, 1, 1)] * 4,
                                 consts=(1, 2, 3, 4)),
    "reduce": lambda: _graph("reduce", [(2, 3)], {"mode": "sum", "axis": (1,),
                                                   "keepdims": True}),
    "cumsum": lambda: _graph("cumsum", [(2, 3)], {"axis": 1}),
    "conv3d": lambda: _graph("conv3d", [(1, 2, 4, 4, 4), (3, 2, 2, 2, 2)], consts=(1,)),
    "roi_align": lambda: _graph("roi_align", [(1, 2, 6, 6), (2, 5)],
                                {"mode": "average", "pooled": (2, 2)}, consts=(1,)),
}

CASES = [  # graph, MegEngine opr type, param table, field, a value megtrace does not compute
    ("conv2d", "Convolution", "Convolution", "mode", "CONVOLUTION"),
    ("conv2d", "Convolution", "Convolution", "format", "NHWC"),
    ("pool2d", "PoolingV1", "Pooling", "format", "NHWC"),
    ("matmul", "MatrixMulV2", "MatrixMul", "format", "MK4"),
    ("batch_norm", "BatchNormV1", "BN", "param_dim", "DIM_111C"),
    ("batch_norm", "BatchNormV1", "BN", "fwd_mode", "TRAINING"),
    ("reduce", "ReduceV2", "Reduce", "data_type", 3),
    ("cumsum", "CumsumV1", "Cumsum", "exclusive", True),
    ("cumsum", "CumsumV1", "Cumsum", "reverse", True),
    ("conv3d", "Convolution3D", "Convolution3D", "mode", "CONVOLUTION"),
    ("conv3d", "Convolution3D", "Convolution3D", "format", "NDHWC"),
    ("roi_align", "ROIAlignV1", "ROIAlign", "format", "NHWC"),
]


def _file_with(graph: Graph, opr_type: str, table: str, field: str, value) -> bytes:
    em, outs = emit_graph(graph, list(graph.input_names), ["y"])
    found = [o for o in em.oprs if o.type == opr_type]
    assert found, f"{opr_type} not written for this graph: {[o.type for o in em.oprs]}"
    params = dict(found[0].params)
    params[table] = {**params[table], field: value}
    found[0].params = list(params.items())
    return serialize(em, outs, DumpOptions())[0]


@pytest.mark.parametrize("graph,opr_type,table,field,value", CASES,
                         ids=[f"{c[2]}.{c[3]}" for c in CASES])
def test_unsupported_param_value_is_refused(graph, opr_type, table, field, value):
    g = GRAPHS[graph]()
    model = read_model(_file_with(g, opr_type, table, field, value))
    with pytest.raises(UnsupportedModelError, match=rf"^{opr_type}: param {table}\.{field}="):
        build_graph(model)


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_the_same_graphs_as_written_are_read(graph):
    g = GRAPHS[graph]()
    em, outs = emit_graph(g, list(g.input_names), ["y"])
    build_graph(read_model(serialize(em, outs, DumpOptions())[0]))
