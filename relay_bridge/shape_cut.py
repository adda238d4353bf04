"""Carry a traced graph's shape arithmetic around TVM's inference passes.

TVM compiles static shapes: its passes would fold `reshape(x, shape_of(x)[0], -1)` into a
reshape to the traced shape, and a Broadcast of a constant to the traced batch into a big
constant. optimize_for_inference therefore cuts the graph: the nodes with a shape input
(OpDef.shape_input) and the shape arithmetic feeding them, reshapes with a -1 dim and
slices, stay out of Relax, their
results enter the Relax function as extra parameters, the values they read leave it as
extra results, and `stitch` puts them back into the optimized graph unchanged. The file
then computes those shapes at run time, as MegEngine's optimized dumps do.

A value-shaped op (cond_take, behind boolean-mask indexing) and every node downstream of
it stay out of Relax too: their traced shapes hold for the traced values only, and TVM
would fix them (a Faster R-CNN keeps a different number of proposals per image).
"""
from __future__ import annotations

from dataclasses import dataclass

from megtrace.errors import CompileError
from megtrace.ir import Graph, Node, Var
from megtrace.ops import get


@dataclass
class ShapeCut:
    original: Graph
    kept: list[Node]          # shape-input nodes and their shape arithmetic, in order
    cut_inputs: list[Var]     # kept results the rest reads: extra inputs of the core
    boundary: list[Var]       # core values the kept nodes read: extra outputs of the core

    def stitch(self, optimized: Graph) -> Graph:
        """`optimized` (the core after TVM, inputs and outputs in core order) with the kept
        nodes put back; nodes are placed as soon as their inputs exist."""
        g = self.original
        final = Graph()
        lifted_env: dict[Var, Var] = {}
        original_env: dict[Var, Var] = {}
        for var, name, lifted in zip(g.inputs, g.input_names, optimized.inputs):
            lifted_env[lifted] = original_env[var] = final.add_input(var.type, name)
        n_out = len(g.outputs)
        pending_boundary = dict(zip(optimized.outputs[n_out:], self.boundary))
        cut_of = dict(zip(self.cut_inputs, optimized.inputs[len(g.inputs):]))

        def mapped(env: dict[Var, Var], consts: dict, var: Var) -> Var | None:
            if var not in env and var in consts:
                env[var] = final.add_const(consts[var], var.name_hint)
            return env.get(var)

        def place(node: Node, env: dict[Var, Var], consts: dict) -> bool:
            ins = [mapped(env, consts, v) for v in node.inputs]
            if any(v is None for v in ins):
                return False
            recorded = [v.type for v in node.outputs] if node.op.value_shaped else None
            outs = final.add_node(node.op, ins, node.kwargs, node.outputs[0].name_hint,
                                  out_types=recorded)
            env.update(zip(node.outputs, outs))
            return True

        def settle() -> None:
            for lifted, var in list(pending_boundary.items()):
                value = mapped(lifted_env, optimized.consts, lifted)
                if value is not None:
                    original_env[var] = value
                    del pending_boundary[lifted]
            for var, lifted in cut_of.items():
                if var in original_env:
                    lifted_env[lifted] = original_env[var]

        kept, core = list(self.kept), list(optimized.nodes)
        while kept or core:
            settle()
            placed = [n for n in kept if place(n, original_env, g.consts)]
            settle()
            placed += [n for n in core if place(n, lifted_env, optimized.consts)]
            if not placed:
                raise CompileError("optimize_for_inference: the shape arithmetic cannot be "
                                   "put back into the optimized graph")
            done = set(placed)
            kept = [n for n in kept if n not in done]
            core = [n for n in core if n not in done]
        settle()
        final.set_outputs([mapped(lifted_env, optimized.consts, v)
                           for v in optimized.outputs[:n_out]], g.output_names)
        return final.prune()


def _follows_run_time_shape(node: Node) -> bool:
    """A reshape with a -1 target dim (`x.reshape(-1, 6)`) and a slice (`x[1:]`,
    `x[:-1]`, `qkv[0]`): MegEngine writes the -1 as the Reshape's unspecified axis and
    open or negative slice bounds as Subtensor items, all resolved against the run-time
    shape; TVM would fix them at the traced sizes (x[1:] as x[1:3])."""
    if node.op is get("subtensor"):
        return True
    return node.op is get("reshape") and -1 in node.kwargs.get("shape", ())


def _downstream_of_value_shapes(graph: Graph) -> set[Node]:
    """The value-shaped nodes and every node reading, directly or not, one of their
    results."""
    found: set[Node] = set()
    tainted: set[Var] = set()
    for node in graph.nodes:
        if node.op.value_shaped or any(v in tainted for v in node.inputs):
            found.add(node)
            tainted.update(node.outputs)
    return found


def split(graph: Graph) -> tuple[Graph, ShapeCut | None]:
    """(the core graph TVM may optimize, the cut to stitch back), or (graph, None) when the
    graph has no shape inputs and no value-shaped op."""
    dynamic = _downstream_of_value_shapes(graph)
    shaped = [n for n in graph.nodes if n.op.has_shape_input(len(n.inputs), n.kwargs)
              or _follows_run_time_shape(n) or n in dynamic]
    if not shaped:
        return graph, None
    producer, shape_of = graph.producers(), get("shape_of")
    arithmetic: set[Node] = set()
    stack = [v for n in shaped
             for v in n.inputs[len(n.inputs) - n.op.run_time_inputs(len(n.inputs), n.kwargs):]]
    while stack:
        node = producer.get(stack.pop())
        if node is None or node in arithmetic:
            continue
        arithmetic.add(node)
        if node.op is not shape_of:
            stack.extend(node.inputs)
    kept_set = arithmetic | set(shaped)
    kept = [n for n in graph.nodes if n in kept_set]
    kept_values = {v for n in kept for v in n.outputs}
    core_nodes = [n for n in graph.nodes if n not in kept_set]
    read_by_core = {v for n in core_nodes for v in n.inputs} | set(graph.outputs)
    cut_inputs = [v for n in kept for v in n.outputs if v in read_by_core]
    sources = set(graph.inputs) | set(graph.consts) | kept_values
    boundary = list(dict.fromkeys(v for n in kept for v in n.inputs if v not in sources))
    core = Graph(list(graph.inputs) + cut_inputs, dict(graph.consts), core_nodes, [],
                 list(graph.input_names) + [f"shape_cut_in{i}" for i in range(len(cut_inputs))])
    core.set_outputs(list(graph.outputs) + boundary,
                     list(graph.output_names) + [f"shape_cut_out{i}" for i in range(len(boundary))])
    return core.prune(), ShapeCut(graph, kept, cut_inputs, boundary)
