"""Neural-network functions with MegEngine's names, arguments and defaults."""
from __future__ import annotations

from typing import Optional, Tuple, Union

import numpy as np

from .. import config as _config
from ..core.tensor import amp as _amp
from ..dispatch import apply
from ..ops._rules import pair
from ..random.rng import global_key, global_seed, uniform
from ..tensor import Tensor
from ._convert import cast, require_tensor
from .conv import _CROSS, _DEFAULT, check_modes, promote_pair
from .batchnorm import batch_norm, sync_batch_norm  # noqa: F401  (F.nn.batch_norm)
from .elemwise import add, relu  # noqa: F401  (F.nn.relu exists in MegEngine)
from .tensor_ops import expand_dims, reshape, squeeze

__all__ = ["conv2d", "max_pool2d", "avg_pool2d", "batch_norm", "sync_batch_norm", "linear", "matmul", "relu",
           "softmax", "logsoftmax", "leaky_relu", "layer_norm", "dropout", "embedding",
           "adaptive_avg_pool2d", "adaptive_max_pool2d", "pad", "interpolate", "remap",
           "warp_affine", "warp_perspective", "deformable_psroi_pooling"]

IntPair = Union[int, Tuple[int, int]]
_F32 = np.dtype(np.float32)
# the config module's dict: its `_compute_mode` property read without a call
_CONFIG = vars(_config)


def _check_mode(name: str, value: str, allowed: tuple[str, ...]) -> str:
    value = str(value).lower()
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")
    return value


_ACCUMULATE_F32 = {"compute_mode": "FLOAT32"}


def conv2d(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntPair = 1,
           padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1,
           conv_mode: str = "cross_correlation", compute_mode: str = "default") -> Tensor:
    """2D convolution (NCHW). With `groups > 1` the weight is 5-d
    `(groups, out_channels // groups, in_channels // groups, kh, kw)`, as in MegEngine."""
    modes = {}
    if conv_mode is not _CROSS or compute_mode is not _DEFAULT or \
            _CONFIG["__compute_mode"] != "default":
        if check_modes("conv2d", conv_mode, compute_mode) == "float32":
            modes = _ACCUMULATE_F32     # float16 data summed in float32, as amp does
    if not (isinstance(inp, Tensor) and isinstance(weight, Tensor)
            and inp.dtype is weight.dtype is _F32):     # float32 pairs need no promotion
        inp, weight = promote_pair("conv2d", inp, weight)
    five_d = weight.ndim == 5
    if groups != 1 and not five_d:
        raise ValueError(f"conv2d: with groups={groups} the weight must be 5-d (groups, "
                         f"oc/groups, ic/groups, kh, kw); got shape {weight.shape}")
    if five_d and weight.shape[0] != groups:
        raise ValueError(f"conv2d: weight has {weight.shape[0]} groups, groups={groups}")
    try:
        stride, padding, dilation = _GEOMETRY[stride, padding, dilation]
    except (KeyError, TypeError):
        stride, padding, dilation = _geometry(stride, padding, dilation)
    out = apply("conv2d", inp, weight, stride=stride, padding=padding, dilation=dilation,
                **modes)
    return out if bias is None else add(out, _amp.low_prec_bias(bias))


# (stride, padding, dilation) as given -> as `pair` normalizes them: one lookup per
# replayed convolution instead of three calls. Equal keys normalize alike (int(1.0) ==
# int(True) == 1); only plain ints and pairs of them are kept.
_GEOMETRY: dict = {}


def _geometry(stride, padding, dilation) -> tuple:
    got = (pair("stride", stride), pair("padding", padding), pair("dilation", dilation))
    key = (stride, padding, dilation)
    if len(_GEOMETRY) < 1024 and all(
            type(v) is int or (type(v) is tuple and all(type(d) is int for d in v))
            for v in key):
        _GEOMETRY[key] = got
    return got


def max_pool2d(inp: Tensor, kernel_size: IntPair, stride: Optional[IntPair] = None,
               padding: IntPair = 0) -> Tensor:
    """2D max pooling; `stride` defaults to `kernel_size`."""
    kernel = pair("kernel_size", kernel_size)
    return apply("pool2d", require_tensor("max_pool2d", inp), mode="max", kernel=kernel,
                 stride=pair("stride", stride if stride is not None else kernel),
                 padding=pair("padding", padding))


def avg_pool2d(inp: Tensor, kernel_size: IntPair, stride: Optional[IntPair] = None,
               padding: IntPair = 0, mode: str = "average_count_exclude_padding") -> Tensor:
    """2D average pooling; `mode` is "average" (padding counted) or
    "average_count_exclude_padding" (the default). MegEngine passes `mode` on to its
    Pooling operator, so "max" gives max pooling here too."""
    mode = _check_mode("avg_pool2d: mode", mode,
                       ("average", "average_count_exclude_padding", "max"))
    kernel = pair("kernel_size", kernel_size)
    return apply("pool2d", require_tensor("avg_pool2d", inp), mode=mode, kernel=kernel,
                 stride=pair("stride", stride if stride is not None else kernel),
                 padding=pair("padding", padding))


def _matmul_operands(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """MegEngine's MatrixMul promotes operands of different dtypes to float32 when either
    is a float or bool (float32 x float16 is float32, int32 x float16 too); two different
    integer dtypes stay as they are and fail in the op, as in MegEngine."""
    if a.dtype == b.dtype or (a.ndim == 1 and b.ndim == 1):   # Dot does not promote
        return a, b
    kinds = (a.dtype.kind, b.dtype.kind)
    if "f" not in kinds and "b" not in kinds:
        return a, b
    return cast(a, "float32"), cast(b, "float32")


def matmul(inp1: Tensor, inp2: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           compute_mode: str = "default", format: str = "default") -> Tensor:
    """Matrix product of the last two axes; leading axes broadcast (batched matmul)."""
    modes = {}
    if compute_mode != "default" or _CONFIG["__compute_mode"] != "default":
        mode = _config._get_actual_op_param(
            _check_mode("matmul: compute_mode", compute_mode, ("default", "float32")),
            _CONFIG["__compute_mode"])
        if mode == "float32":
            modes = _ACCUMULATE_F32
    if format != "default":
        _check_mode("matmul: format", format, ("default",))
    a, b = _matmul_operands(require_tensor("matmul", inp1), require_tensor("matmul", inp2))
    a_ndim, b_ndim = a.ndim, b.ndim
    assert a_ndim > 0 and b_ndim > 0
    if a_ndim == 1 and b_ndim == 1:        # MegEngine dispatches this to Dot
        return apply("dot", a, b)
    # a vector operand is a one-row (left) or one-column (right) matrix, dropped afterwards
    out = apply("matmul", expand_dims(a, 0) if a_ndim == 1 else a,
                expand_dims(b, -1) if b_ndim == 1 else b,
                transpose_a=bool(transpose_a), transpose_b=bool(transpose_b), **modes)
    if b_ndim == 1:
        out = squeeze(out, -1)
    return squeeze(out, -2 if b_ndim > 1 else -1) if a_ndim == 1 else out


def linear(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
           compute_mode: str = "default", format: str = "default") -> Tensor:
    """`inp @ weight.T + bias`, with `weight` of shape (out_features, in_features)."""
    out = matmul(inp, weight, transpose_b=True, compute_mode=compute_mode, format=format)
    return out if bias is None else add(out, _amp.low_prec_bias(bias))


def _softmax_axis(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1     # MegEngine's default when axis is None


def softmax(inp: Tensor, axis: Optional[int] = None) -> Tensor:
    x = require_tensor("softmax", inp)
    return apply("softmax", x, axis=_softmax_axis(x.ndim) if axis is None else int(axis))


def logsoftmax(inp: Tensor, axis) -> Tensor:
    """inp - logsumexp(inp, axis)."""
    from .math import logsumexp
    from .elemwise import sub
    return sub(inp, logsumexp(inp, axis, keepdims=True))


def leaky_relu(inp: Tensor, negative_slope: float = 0.01) -> Tensor:
    """MegEngine's Elemwise PRELU with a Python-float slope: integer and bool inputs are
    computed in float32 (leaky_relu(int32 [-2, 3], 0.1) is [-0.2, 3.0])."""
    x = require_tensor("leaky_relu", inp)
    if x.dtype.kind != "f":
        x = cast(x, "float32")
    return apply("leaky_relu", x, negative_slope=float(negative_slope))


def layer_norm(inp: Tensor, normalized_shape, affine: bool = True,
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing `normalized_shape` axes."""
    x = require_tensor("layer_norm", inp)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"layer_norm: normalized_shape {shape} does not match the trailing "
                         f"axes of input shape {x.shape}")
    w = weight if (affine and weight is not None) else Tensor(np.ones(shape, np.float32))
    b = bias if (affine and bias is not None) else Tensor(np.zeros(shape, np.float32))
    return apply("layer_norm", x, w, b, eps=float(eps), normalized_dim=len(shape))


def dropout(inp: Tensor, drop_prob: float, training: bool = True) -> Tensor:
    """Zero elements with probability `drop_prob` and rescale by 1/(1-p) when training;
    identity otherwise. The mask comes from the global seed's dropout generator (its own
    stream, as MegEngine's Dropout opr), so a traced or compiled function draws a new
    mask on every call; dumped as MegEngine's Dropout opr."""
    if not 0 <= drop_prob < 1:
        raise ValueError(f"dropout: drop_prob must be in [0, 1); got {drop_prob}")
    x = require_tensor("dropout", inp)
    if not training or drop_prob == 0:
        return x
    if x.dtype != np.float32:       # (float16: drawn as before, uniform >= p)
        from .elemwise import mul
        keep = (uniform(size=tuple(x.shape)) >= drop_prob).astype(x.dtype)
        return mul(x, keep * (1.0 / (1 - drop_prob)))
    return apply("rng_dropout", global_key("dropout", x.device), x, drop_prob=float(drop_prob),
                 seed=global_seed())


def embedding(inp: Tensor, weight: Tensor, padding_idx: Optional[int] = None,
              max_norm: Optional[float] = None, norm_type: Optional[float] = None) -> Tensor:
    """Rows of `weight` picked by the integer tensor `inp`."""
    if padding_idx is not None:
        raise ValueError("Not support padding_idx Now!")
    if max_norm is not None or norm_type is not None:
        raise ValueError("Not support weight normlization Now!")
    idx = require_tensor("embedding", inp)
    flat = reshape(idx, (-1,)) if idx.ndim != 1 else idx
    if flat.dtype != np.int32:
        flat = flat.astype("int32")
    rows = apply("take", require_tensor("embedding", weight), flat, axis=0)
    return reshape(rows, tuple(idx.shape) + (weight.shape[1],)) if idx.ndim != 1 else rows


def _oshp(name: str, oshp) -> tuple[int, int]:
    return pair(name, oshp)


def adaptive_avg_pool2d(inp: Tensor, oshp) -> Tensor:
    return apply("adaptive_pool2d", require_tensor("adaptive_avg_pool2d", inp),
                 mode="average", out=_oshp("oshp", oshp))


def adaptive_max_pool2d(inp: Tensor, oshp) -> Tensor:
    return apply("adaptive_pool2d", require_tensor("adaptive_max_pool2d", inp), mode="max",
                 out=_oshp("oshp", oshp))


def pad(src: Tensor, pad_width, mode: str = "constant", constant_value: float = 0.0) -> Tensor:
    """Pad the leading axes by (before, after) pairs (axes without a pair are not padded);
    mode "constant", "reflect" or "replicate" (alias "edge")."""
    x = require_tensor("pad", src)
    mode = str(mode).lower()
    assert mode in ["constant", "edge", "replicate", "reflect"]
    if mode == "edge":
        mode = "replicate"
    widths = [(int(a), int(b)) for a, b in pad_width]
    if len(widths) > x.ndim:
        raise ValueError(f"pad: {len(widths)} (before, after) pairs for a {x.ndim}-d tensor")
    widths += [(0, 0)] * (x.ndim - len(widths))
    return apply("pad", x, pad_width=tuple(widths), mode=mode, value=float(constant_value))


# MegEngine's F.nn also holds the vision functionals and the losses.
from .loss import *  # noqa: E402,F401,F403
from .onehot import *  # noqa: E402,F401,F403
from .onehot import __all__ as _onehot_all  # noqa: E402
from .rearrange import *  # noqa: E402,F401,F403
from .rearrange import __all__ as _rearrange_all  # noqa: E402
from .vision import *  # noqa: E402,F401,F403
from .vision import deformable_psroi_pooling  # noqa: E402,F401  (F.nn in MegEngine)
from .norms import *  # noqa: E402,F401,F403
from .norms import __all__ as _norms_all  # noqa: E402

__all__ += [*_onehot_all, *_rearrange_all, *_norms_all]
