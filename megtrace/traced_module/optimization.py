"""`traced_module.optimize`: inference rewrites of a TracedModule's graph (MegEngine's
traced_module._passes). megtrace has "FuseAddMul" (fuse_add_mul.py), "BackwardFoldScale"
(fold_scale.py) and "FuseConvBn":
an eval-mode BatchNorm whose input is
a convolution read by nothing else is folded into that convolution's weight and bias, for
Conv2d/BatchNorm2d module calls and for F.conv2d/F.batch_norm calls on attributes (what
`flatten()` leaves of user subclasses); the BatchNorm disappears from the graph."""
from __future__ import annotations

from copy import deepcopy
from typing import Optional, Sequence, Union

import numpy as np

from .. import functional as F
from .. import module as M
from ..logger import get_logger
from ..tensor import Parameter
from ..utils.bn_fusion import fold_weight_bias
from .expr import CallFunction, CallMethod, Expr, GetAttr
from .fold_scale import backward_fold_scale
from .fuse_add_mul import fuse_add_mul
from .node import ModuleNode, TensorNode
from .traced_module import TracedModule
from .utils import get_subattr

logger = get_logger(__name__)

KNOWN_PASSES = ("FuseConvBn", "FuseAddMul", "BackwardFoldScale")


def optimize(module: TracedModule,
             enabled_pass: Union[str, Sequence[str]] = ("FuseConvBn",)) -> TracedModule:
    """A copy of `module` with the passes in `enabled_pass` applied (MegEngine's order);
    names of no pass are ignored, as MegEngine does."""
    if not isinstance(module, TracedModule):
        raise TypeError(f"optimize: expects a TracedModule; got {type(module).__name__}")
    passes = [enabled_pass] if isinstance(enabled_pass, str) else list(enabled_pass)
    if "BackwardFoldScale" in passes and "FuseConvBn" not in passes:
        logger.warning("Since BackwardFoldScale requires FuseConvBn, FuseConvBn will be "
                       "enabled.")
        passes.append("FuseConvBn")
    module = deepcopy(module)
    if "FuseConvBn" in passes:
        _fuse_conv_bn(module)
    # MegEngine's order: FuseConvBn, FuseAddMul, then BackwardFoldScale and FuseAddMul again
    if "FuseAddMul" in passes:
        fuse_add_mul(module)
    if "BackwardFoldScale" in passes:
        backward_fold_scale(module)
        if "FuseAddMul" in passes:
            fuse_add_mul(module)
    return module


def _graphs(module: TracedModule):
    seen = set()
    for mod in module.modules():
        if isinstance(mod, TracedModule):
            mod._bind_graphs()
        for graph in getattr(mod, "argdef_graph_map", {}).values():
            if id(graph) not in seen:
                seen.add(id(graph))
                yield mod, graph


def _fuse_conv_bn(module: TracedModule) -> None:
    # a submodule's graph and the flattened top graph may both call the same conv and bn
    # objects: fold each (conv, bn) pair once, rewire every graph
    folded: dict[int, int] = {}
    for owner, graph in _graphs(module):
        changed = False
        for expr in list(graph._exprs):
            if expr not in graph._exprs:
                continue
            bn = _batch_norm(owner, expr)
            if bn is None:
                continue
            bn_key, inp, gamma, beta, mean, var, eps = bn
            conv = _convolution(owner, graph, inp)
            if conv is None:
                continue
            conv_key, weight, bias, store = conv
            done = folded.get(conv_key)
            if done is None:
                store(*fold_weight_bias(weight, bias, gamma, beta, mean, var, eps))
                folded[conv_key] = bn_key
            elif done != bn_key:
                continue      # folded with another BatchNorm already: leave this one
            graph.replace_node({expr.outputs[0]: inp})
            changed = True
        if changed:
            graph.compile()


def _module_of(node) -> Optional[M.Module]:
    return node.owner if isinstance(node, ModuleNode) else None


def _attr(owner, node) -> Optional[object]:
    """The value of a node fetched by GetAttr from the graph's own module, else None."""
    expr = node.expr if isinstance(node, TensorNode) else None
    if not isinstance(expr, GetAttr) or expr.inputs[0].owner is not owner:
        return None
    return get_subattr(owner, expr.name)


def _batch_norm(owner, expr: Expr):
    """(key, input node, gamma, beta, mean, var, eps) of an eval-mode BatchNorm2d module
    call or F.batch_norm call on the module's attributes, else None."""
    if isinstance(expr, CallMethod) and expr.method == "__call__" and len(expr.inputs) == 2:
        bn = _module_of(expr.inputs[0])
        if type(bn) is not M.BatchNorm2d or bn.training:
            return None
        return (id(bn), expr.inputs[1], bn.weight, bn.bias, bn.running_mean, bn.running_var,
                bn.eps)
    if not isinstance(expr, CallFunction) or expr.func is not F.batch_norm:
        return None
    args = expr.named_args
    if args.get("training") or not isinstance(args.get("inp"), TensorNode):
        return None
    stats = []
    for k in ("running_mean", "running_var", "weight", "bias"):
        v = args.get(k)
        stats.append(_attr(owner, v) if isinstance(v, TensorNode) else v)
        if isinstance(v, TensorNode) and stats[-1] is None:
            return None
    mean, var, gamma, beta = stats
    if mean is None or var is None:
        return None
    return id(mean), args["inp"], gamma, beta, mean, var, args.get("eps", 1e-5)


def _convolution(owner, graph, node: TensorNode):
    """(key, weight, bias, store(weight, bias)) of the convolution making `node` when
    nothing else reads `node` and its weights belong to it alone, else None."""
    expr = node.expr
    if expr is None or expr not in graph._exprs or len(node.users) != 1 or \
            len(expr.outputs) != 1 or node in graph.outputs:
        return None
    if isinstance(expr, CallMethod) and expr.method == "__call__":
        conv = _module_of(expr.inputs[0])
        if type(conv) is not M.Conv2d or \
                sum(1 for u in expr.inputs[0].users if isinstance(u, CallMethod)) != 1:
            return None      # a convolution module called elsewhere too keeps its weights

        def store_module(weight, bias):
            conv.weight = Parameter(weight.numpy())
            conv.bias = Parameter(bias.numpy())
        return id(conv), conv.weight, conv.bias, store_module
    if not isinstance(expr, CallFunction) or expr.func is not F.conv2d:
        return None
    args = expr.named_args
    w_node, b_node = args.get("weight"), args.get("bias")
    if not isinstance(w_node, TensorNode) or len(w_node.users) != 1:
        return None
    w = _attr(owner, w_node)
    if w is None:
        return None
    if b_node is None:          # no bias: the folded one becomes a constant argument
        def store_const(weight, bias):
            w._reset(Parameter(np.asarray(weight.numpy())))
            expr.set_arg("bias", Parameter(np.asarray(bias.numpy())))
        return id(w), w, None, store_const
    b = _attr(owner, b_node) if isinstance(b_node, TensorNode) else None
    if b is None or len(b_node.users) != 1:
        return None

    def store_attrs(weight, bias):
        w._reset(Parameter(np.asarray(weight.numpy())))
        b._reset(Parameter(np.asarray(bias.numpy()).reshape(b.shape)))
    return id(w), w, b, store_attrs
