"""The "BackwardFoldScale" pass of `traced_module.optimize`: a multiplication by a
constant scalar is pushed backwards through ReLU (positive scales), additions (both
operands, or the operand and the constant), reshapes and earlier constant
multiplications into the weight and bias of the convolutions that start the chain, and
then removed, as MegEngine's pass does (`y = relu(conv(x)) * 3` becomes a convolution with
3x weights). Only the top graph is rewritten (run it on a flattened module); values read by
more than one expr are never scaled."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .. import functional as F
from .. import module as M
from ..tensor import Parameter, Tensor
from .expr import CallFunction, CallMethod, Constant, Expr, GetAttr
from .node import ModuleNode, TensorNode
from .utils import get_subattr, rewrite_to_fixpoint

_ADD_METHODS = ("__add__", "__radd__")
_MUL_METHODS = ("__mul__", "__rmul__")


def backward_fold_scale(module) -> None:
    """Fold constant scalings of `module`'s top graph into its convolutions, in place."""
    rewrite_to_fixpoint(module, _fold_mul)


# -- constants --------------------------------------------------------------------------
def _const_value(owner, value):
    """The value of an expr argument when it is a constant (a number, a Tensor, a tensor
    attribute of the module, an index of one), else None."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return np.float32(value)
    if isinstance(value, Tensor):
        return value.numpy()
    if not isinstance(value, TensorNode) or value.expr is None:
        return None
    expr = value.expr
    if isinstance(expr, Constant) and isinstance(expr.value, Tensor):
        return expr.value.numpy()
    if isinstance(expr, GetAttr) and expr.inputs[0].owner is owner:
        attr = get_subattr(owner, expr.name)
        return attr.numpy() if isinstance(attr, Tensor) else None
    if isinstance(expr, CallMethod) and expr.method == "__getitem__":
        base = _const_value(owner, expr.inputs[0])
        args = expr.args
        if base is not None and len(args) == 2 and not isinstance(args[1], TensorNode):
            try:
                return np.asarray(base[args[1]])
            except (IndexError, TypeError):
                return None
    return None


def _scalar(owner, value) -> Optional[float]:
    v = _const_value(owner, value)
    if v is None or np.size(v) != 1:
        return None
    return float(np.asarray(v).reshape(()))


# -- matching ---------------------------------------------------------------------------
def _binary(expr: Expr, methods, func) -> Optional[tuple]:
    """(lhs, rhs) of `a op b` written as a Tensor method or a functional call."""
    if isinstance(expr, CallMethod) and expr.method in methods:
        args = expr.args
        return (args[0], args[1]) if len(args) == 2 else None
    if isinstance(expr, CallFunction) and expr.func is func:
        args = expr.named_args
        names = list(args)
        return (args[names[0]], args[names[1]]) if len(names) >= 2 else None
    return None


def _fold_mul(owner, graph, expr: Expr) -> bool:
    """`y = x * c` (c a constant scalar): fold c into what makes x, make y's readers read x."""
    pair = _binary(expr, _MUL_METHODS, F.mul)
    if pair is None or len(expr.outputs) != 1:
        return False
    for x, c in (pair, pair[::-1]):
        scale = _scalar(owner, c)
        if scale is None or not isinstance(x, TensorNode) or scale == 0:
            continue
        actions: list[Callable[[], None]] = []
        if _plan(owner, graph, x, scale, actions):
            for act in actions:
                act()
            graph.replace_node({expr.outputs[0]: x})
            return True
    return False


def _sole_user(graph, node: TensorNode) -> Optional[Expr]:
    expr = node.expr
    if expr is None or expr not in graph._exprs or len(node.users) != 1 or \
            node in graph.outputs or len(expr.outputs) != 1:
        return None
    return expr


def _plan(owner, graph, node: TensorNode, scale: float, actions: list) -> bool:
    """Whether `node` can be made `scale` times larger at its source; the edits go to
    `actions` (applied only when the whole plan works)."""
    expr = _sole_user(graph, node)
    if expr is None:
        return False
    if isinstance(expr, CallFunction) and expr.func in (F.relu,):
        return scale > 0 and _plan(owner, graph, expr.inputs[0], scale, actions)
    if isinstance(expr, CallFunction) and expr.func in (F.reshape, F.flatten):
        return _plan(owner, graph, expr.inputs[0], scale, actions)
    conv = _conv_scaler(owner, graph, expr)
    if conv is not None:
        actions.append(lambda: conv(scale))
        return True
    add = _binary(expr, _ADD_METHODS, F.add)
    if add is not None:
        return _plan_add(owner, graph, expr, add, scale, actions)
    mul = _binary(expr, _MUL_METHODS, F.mul)
    if mul is not None:       # x * c0, scaled by c: (x * c0 * c), the constant rewritten
        return _plan_const_operand(owner, expr, mul, scale, actions)
    return False


def _plan_add(owner, graph, expr, pair, scale, actions) -> bool:
    a, b = pair
    ca, cb = _const_value(owner, a), _const_value(owner, b)
    if ca is None and cb is None:
        if a is b:
            return False
        return _plan(owner, graph, a, scale, actions) and \
            _plan(owner, graph, b, scale, actions)
    return _plan_const_operand(owner, expr, pair, scale, actions) and \
        _plan(owner, graph, b if ca is not None else a, scale, actions)


def _plan_const_operand(owner, expr, pair, scale, actions) -> bool:
    """Scale the constant operand of `expr` (in an add, the other operand is scaled too;
    in a mul, scaling the constant scales the product)."""
    a, b = pair
    ca, cb = _const_value(owner, a), _const_value(owner, b)
    if (ca is None) == (cb is None):
        return False
    index = 0 if ca is not None else 1
    value = ca if ca is not None else cb
    new = (np.asarray(value) * np.float32(scale)).astype(np.float32)

    def rewrite():
        # a Tensor, not a number: it may be the object a Tensor method is called on
        _set_operand(expr, index, Tensor(new))
    actions.append(rewrite)
    return True


def _set_operand(expr: Expr, index: int, value) -> None:
    """Make positional argument `index` of `expr` the constant `value` (a node read there
    stops being read)."""
    args_def = expr.arg_def.children_defs[0]
    position = sum(ch.num_leaves for ch in args_def.children_defs[:index])
    consts = dict(expr.const_val)
    if position not in consts:      # a node: the leaf position among inputs and constants
        nodes_before = sum(1 for p in range(position) if p not in consts)
        node = expr.inputs.pop(nodes_before)
        if expr not in expr.inputs and expr in node.users:
            node.users.remove(expr)
    consts[position] = value
    expr.const_val = sorted(consts.items())


def _conv_scaler(owner, graph, expr) -> Optional[Callable[[float], None]]:
    """A function scaling the weight and bias of the convolution `expr` (a Conv2d module
    called once, or F.conv2d on tensor attributes read only there), else None."""
    if isinstance(expr, CallMethod) and expr.method == "__call__" and \
            isinstance(expr.inputs[0], ModuleNode):
        conv = expr.inputs[0].owner
        if type(conv) is not M.Conv2d or \
                sum(1 for u in expr.inputs[0].users if isinstance(u, CallMethod)) != 1:
            return None

        def scale_module(c):
            conv.weight = Parameter(conv.weight.numpy() * np.float32(c))
            if conv.bias is not None:
                conv.bias = Parameter(conv.bias.numpy() * np.float32(c))
        return scale_module
    if not isinstance(expr, CallFunction) or expr.func is not F.conv2d:
        return None
    args = expr.named_args
    tensors = []
    for key in ("weight", "bias"):
        node = args.get(key)
        if node is None and key == "bias":
            continue
        if not isinstance(node, TensorNode) or len(node.users) != 1 or \
                not isinstance(node.expr, GetAttr) or node.expr.inputs[0].owner is not owner:
            return None
        tensors.append(get_subattr(owner, node.expr.name))

    def scale_attrs(c):
        for t in tensors:
            t._reset(Parameter(t.numpy() * np.float32(c)))
    return scale_attrs
