"""Run a Graph with each op's NumPy implementation: the reference executor.

Used to read values inside a symbolic trace before anything is compiled, and by tests
as an oracle independent of TVM.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from .ir import Graph, Node, Var


def evaluate(graph: Graph, inputs: Mapping[Var, np.ndarray], wanted: Iterable[Var],
             extra_consts: Mapping[Var, np.ndarray] | None = None) -> dict[Var, np.ndarray]:
    """Values of `wanted`, computing only the nodes they depend on."""
    env: dict[Var, np.ndarray] = {**graph.consts, **(extra_consts or {}), **inputs}
    wanted = list(wanted)
    needed = set(wanted)
    plan = []
    for node in reversed(graph.nodes):
        if any(v in needed for v in node.outputs):
            plan.append(node)
            needed.update(node.inputs)
    for node in reversed(plan):
        if all(v in env for v in node.outputs):
            continue
        try:
            outs = node.op.run_eager([env[v] for v in node.inputs], _run_time_params(node, env))
        except Exception as e:
            e.add_note(f"while interpreting {node}")
            raise
        env.update(zip(node.outputs, outs))
    return {v: env[v] for v in wanted}


def _run_time_params(node: Node, env: Mapping[Var, np.ndarray]) -> dict:
    """The node's params, its `shape` or slice bounds taken from its run-time inputs when
    it has them: after a value-shaped op the traced values hold for the traced call only."""
    n_run_time = node.op.run_time_inputs(len(node.inputs), node.kwargs)
    if not n_run_time:
        return node.kwargs
    if node.op.shape_input:
        return {**node.kwargs,
                node.op.shape_param: tuple(int(d) for d in env[node.inputs[-1]])}
    # slice bounds (OpDef.int_inputs): the rows' given bounds, in order, are the inputs
    key = "index" if "index" in node.kwargs else "slices"
    values = iter(int(env[v]) for v in node.inputs[-n_run_time:])
    rows = tuple((row[0], *(b if b is None else next(values) for b in row[1:]))
                 for row in node.kwargs[key])
    return {**node.kwargs, key: rows}


def run(graph: Graph, *arrays: np.ndarray) -> list[np.ndarray]:
    """Run the whole graph on input arrays (in `graph.inputs` order)."""
    values = evaluate(graph, dict(zip(graph.inputs, arrays)), graph.outputs)
    return [values[v] for v in graph.outputs]
