"""The "FuseAddMul" pass of `traced_module.optimize`: adjacent additions of constants
become one (`(x + 1) + 2` -> `x + 3`), and so do adjacent multiplications by constants
(`(x * 2) * 3` -> `x * 6`), as MegEngine's pass folds them. Only the top graph is
rewritten; a value read by more than one expr is left alone."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import functional as F
from ..tensor import Tensor
from .expr import CallMethod, Expr
from .fold_scale import _ADD_METHODS, _MUL_METHODS, _binary, _const_value, _set_operand
from .node import TensorNode
from .utils import rewrite_to_fixpoint

_KINDS = (("add", _ADD_METHODS, F.add, np.add), ("mul", _MUL_METHODS, F.mul, np.multiply))


def fuse_add_mul(module) -> None:
    """Fold chains of constant additions / multiplications in `module`'s top graph."""
    rewrite_to_fixpoint(module, _fold_pair)


def _split(owner, expr: Expr):
    """(kind, variable operand, its position, constant value) of `x op c`, else None."""
    for kind, methods, func, _ in _KINDS:
        pair = _binary(expr, methods, func)
        if pair is None:
            continue
        for index in (0, 1):
            var, const = pair[index], pair[1 - index]
            value = _const_value(owner, const)
            if isinstance(var, TensorNode) and value is not None and \
                    _const_value(owner, var) is None:
                return kind, var, index, value, const
    return None


def _fold_pair(owner, graph, expr: Expr) -> bool:
    outer = _split(owner, expr)
    if outer is None:
        return False
    kind, var, var_index, value, const = outer
    inner_expr = _producer(graph, var)
    inner = _split(owner, inner_expr) if inner_expr is not None else None
    if inner is None or inner[0] != kind:
        return False
    _, inner_var, _, inner_value, inner_const = inner
    combine = dict((k, ufunc) for k, _, _, ufunc in _KINDS)[kind]
    folded = combine(np.asarray(inner_value), np.asarray(value))
    ints = all(isinstance(c, (int, np.integer)) and not isinstance(c, bool)
               for c in (const, inner_const))
    position = 1 - var_index
    # a number stays a number, except where a Tensor method is called on it
    as_number = ints and not (position == 0 and isinstance(expr, CallMethod))
    _set_operand(expr, position, int(folded) if as_number else Tensor(np.asarray(folded)))
    expr.replace_inputs({var: inner_var})
    return True


def _producer(graph, node: TensorNode) -> Optional[Expr]:
    expr = node.expr
    if expr is None or expr not in graph._exprs or len(node.users) != 1 or \
            node in graph.outputs:
        return None
    return expr
