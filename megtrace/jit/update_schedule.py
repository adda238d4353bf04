"""Run a traced training step's update as soon as its gradient exists.

A traced step records the optimizer after the whole backward pass, so every weight
gradient is alive at once at the end of the step, beside the new weights and optimizer
states it makes. The nodes that feed only a few graph outputs (one parameter's gradient
reduction, its momentum and weight update; a BatchNorm running statistic) need not wait
for the whole backward pass: each chain's last nodes (those whose values only leave the
graph) are moved to just after the last node they depend on that stays in place, and
after the last other reader of any graph input they read, so that a new value can be
written over the input it replaces (donation, relay_bridge/donate.py); the rest of the
chain goes as late as its readers allow, so a value the chain reads early
(`momentum * buf`) does not hold memory through the forward pass. Values do not change,
only the order of the nodes; the memory plans that follow (TVM's static plan, the
sublinear checkpoint search) then see each gradient die right after its update.
"""
from __future__ import annotations

from ..ir import Graph, Var

_BEFORE_ALL = -1
MAX_TAIL_OUTPUTS = 4     # an optimizer's per-parameter update writes 1-3 outputs


def tail_nodes(graph: Graph) -> set[int]:
    """Indices of the nodes whose values reach at most MAX_TAIL_OUTPUTS graph outputs,
    in a graph with more outputs than that (the update side of a training step)."""
    outputs = set(graph.outputs)
    if len(outputs) <= MAX_TAIL_OUTPUTS:
        return set()
    reach: dict[Var, frozenset | None] = {v: frozenset([v]) for v in outputs}
    tail: set[int] = set()
    for i in range(len(graph.nodes) - 1, -1, -1):
        node = graph.nodes[i]
        found: set = set()
        for v in node.outputs:
            r = reach.get(v, frozenset())
            if r is None:
                found = None
                break
            found |= r
        if found is not None and len(found) > MAX_TAIL_OUTPUTS:
            found = None
        if found:
            tail.add(i)
        many = None if found is None else frozenset(found)
        for v in node.inputs:
            prev = reach.get(v, frozenset())
            if prev is None or many is None:
                reach[v] = None
            else:
                merged = prev | many
                reach[v] = merged if len(merged) <= MAX_TAIL_OUTPUTS else None
    return tail


def schedule_updates(graph: Graph) -> Graph:
    """`graph` with each chain of tail nodes (see tail_nodes) run as soon as the nodes
    it depends on have run; the same graph object when nothing moves."""
    nodes = graph.nodes
    tail = tail_nodes(graph)
    if not tail or len(tail) == len(nodes):
        return graph
    producer = {v: i for i, n in enumerate(nodes) for v in n.outputs}
    fixed_readers: dict[Var, int] = {}       # graph input -> last fixed node reading it
    for i, node in enumerate(nodes):
        if i not in tail:
            for v in node.inputs:
                if v not in producer:
                    fixed_readers[v] = i
    deps = {i: [producer[v] for v in nodes[i].inputs if v in producer] for i in tail}
    # ready: the last fixed node a tail node waits for (through its chain); depth: the
    # latest node (in the recorded order) its chain reads, so deeper chains go first
    ready: dict[int, int] = {}
    depth: dict[int, int] = {}
    for i in sorted(tail):
        waits = [ready[p] if p in tail else p for p in deps[i]]
        waits += [fixed_readers[v] for v in nodes[i].inputs if v in fixed_readers]
        ready[i] = max(waits, default=_BEFORE_ALL)
        depth[i] = max([depth[p] if p in tail else p for p in deps[i]], default=_BEFORE_ALL)
    has_tail_reader = {p for i in tail for p in deps[i] if p in tail}
    sinks: dict[int, list[int]] = {}
    for i in sorted(tail):
        if i not in has_tail_reader:
            sinks.setdefault(ready[i], []).append(i)
    order: list[int] = []
    emitted: set[int] = set()

    def emit_chain(i: int) -> None:
        # what reads only graph inputs (momentum * buf) last, right before its reader
        for p in sorted(deps[i], key=lambda p: p in tail and depth[p] == _BEFORE_ALL):
            if p in tail and p not in emitted:
                emit_chain(p)
        emitted.add(i)
        order.append(i)

    def emit_sinks(at: int) -> None:
        for i in sorted(sinks.get(at, ()), key=lambda i: (-depth[i], i)):
            if i not in emitted:
                emit_chain(i)
    emit_sinks(_BEFORE_ALL)
    for i in range(len(nodes)):
        if i not in tail:
            order.append(i)
            emit_sinks(i)
    if order == list(range(len(nodes))):
        return graph
    assert len(order) == len(nodes), "update_schedule: a tail node was not placed"
    new = Graph(list(graph.inputs), dict(graph.consts), [nodes[i] for i in order], [],
                list(graph.input_names))
    new.set_outputs(graph.outputs, graph.output_names)
    return new
