"""How the "nhwc" format mark passes through ops (MegEngine's FormatTransformation).

megtrace keeps every value in its logical (NCHW) layout, so a format is only a mark
(`Tensor.format`, `amp.convert_tensor_format`); results carry it on as MegEngine's
tensors do: elementwise ops, concat and type conversions take their inputs' common
non-default format; convolution, pooling, batch norm, resize and warps the first
input's; reshape and broadcast keep NHWC for 4-d results; every other op gives "default".
`in_use` stays False until a tensor is marked, so unmarked programs pay nothing.
"""
from __future__ import annotations

in_use = False

_COMMON = frozenset({
    "relu", "sigmoid", "tanh", "exp", "log", "neg", "abs", "floor", "ceil", "sin", "cos",
    "sqrt", "square", "round", "log1p", "expm1", "erf", "relu6", "silu", "gelu", "hswish",
    "hsigmoid", "softplus", "logsigmoid", "add", "sub", "mul", "div", "maximum", "minimum",
    "pow", "floor_div", "mod", "logical_and", "logical_or", "logical_xor", "logical_not",
    "fuse_add_relu", "fuse_add_sigmoid", "fuse_add_tanh", "fuse_mul_add3", "asin", "acos",
    "atan2", "logaddexp", "left_shift", "right_shift", "tan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "sign", "isnan", "isinf", "lt", "le", "gt", "ge", "eq", "clip",
    "leaky_relu", "where", "concat", "astype", "copy"})
_FIRST = frozenset({"conv2d", "conv_bias", "pool2d", "batch_norm", "adaptive_pool2d",
                    "resize", "warp_affine"})
_SHAPED = frozenset({"reshape", "broadcast_to"})


def mark_used() -> None:
    global in_use
    in_use = True


def propagate(name: str, inputs: tuple, outs: tuple) -> None:
    """Set the format of `outs`, results of op `name` on `inputs`."""
    if name in _COMMON:
        fmt = next((t._format for t in inputs if t._format != "default"), "default")
    elif name in _FIRST:
        fmt = inputs[0]._format if inputs else "default"
    elif name in _SHAPED:
        fmt = inputs[0]._format if inputs and outs[0].ndim == 4 else "default"
    else:
        return
    if fmt != "default":
        for o in outs:
            o._format = fmt
