"""TracedModule.flatten: one graph for the whole model, every called TracedModule's graph
inlined at its call, attribute fetches merged into paths from the top module."""
from __future__ import annotations

import copy

from .expr import Constant, Expr, GetAttr, is_call_module
from .node import Node


def _redirect(graph, old: Node, new: Node, readers: list[Expr]) -> None:
    for user in readers:
        user.inputs[:] = [new if n is old else n for n in user.inputs]
        new.users.append(user)
    graph._outputs[:] = [new if n is old else n for n in graph._outputs]


def _inline(graph, exprs: list[Expr]) -> list[Expr]:
    from .traced_module import TracedModule
    flat: list[Expr] = []
    for expr in exprs:
        owner = expr.inputs[0].owner if is_call_module(expr) else None
        if not isinstance(owner, TracedModule) or owner.is_qat or expr.arg_def not in \
                owner.argdef_graph_map:
            flat.append(expr)
            continue
        sub = owner.argdef_graph_map[expr.arg_def]
        memo = {id(e.value): e.value for e in sub._exprs if isinstance(e, Constant)}
        sub = copy.deepcopy(sub, memo)
        given = {id(n): m for n, m in zip(sub._inputs, expr.inputs)}
        for e in sub._exprs:
            for i, n in enumerate(e.inputs):
                if id(n) in given:
                    e.inputs[i] = given[id(n)]
                    given[id(n)].users.append(e)
        for node in expr.inputs:
            while expr in node.users:
                node.users.remove(expr)
        prefix = expr.inputs[0].name
        outputs = {id(o) for o in sub._outputs}
        for e in sub._exprs:
            for n in e.outputs:
                if id(n) not in outputs:
                    n._name = f"{prefix}_{n._name}"
        for call_out, sub_out in zip(expr.outputs, sub._outputs):
            if id(sub_out) in given:      # the subgraph hands an input straight back
                _redirect(graph, call_out, given[id(sub_out)], list(call_out.users))
                continue
            # the call's result node (and its name) is now made by the inlined expr
            maker = sub_out.expr
            maker.outputs[:] = [call_out if n is sub_out else n for n in maker.outputs]
            call_out.expr = maker
            call_out._qualname = sub_out._qualname
            for user in sub_out.users:
                user.inputs[:] = [call_out if n is sub_out else n for n in user.inputs]
                call_out.users.append(user)
        flat.extend(_inline(graph, sub._exprs))
    return flat


def flatten_module(module):
    new = copy.deepcopy(module)
    graph = new.graph
    graph._exprs = _inline(graph, graph._exprs)
    graph.compile()
    for expr in graph._exprs:
        graph._own(expr)
    graph._namespace.used_names.clear()
    for node in graph.nodes(False):
        node._name = graph._namespace.create_unique_name(node._name or "_", node)
        if isinstance(node.expr, GetAttr):
            node._qualname = f"{graph._qualname}.{node.expr.name}"
    new._bind_graphs()
    graph._reset_ids()
    return new


__all__ = ["flatten_module"]
