"""`megtrace.core.tensor.megbrain_graph`: the module path of MegEngine 1.13's load_graph
and dump_graph, for scripts that read or write models through it
(`from megengine.core.tensor import megbrain_graph as G; G.load_graph(path)`).

`load_graph` returns megtrace's loaded model, which unpacks and reads like MegEngine's
CompGraphLoadResult (graph, output_vars_dict, output_vars_list, metadata); the output
vars go to `cgtools` and `dump_graph` as MegEngine's do."""
from ...dump import dump_graph
from ...graph_io import load_graph

__all__ = ["load_graph", "dump_graph"]
