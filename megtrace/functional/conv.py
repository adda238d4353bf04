"""Convolutions other than conv2d, with MegEngine 1.13's names, arguments and defaults
(`F.conv1d`, `F.conv3d`, `F.conv_transpose2d`, `F.conv_transpose3d`, `F.local_conv2d`,
`F.deformable_conv2d`).

Mixed input/weight dtypes promote to the common one (float16 input with float32 weight
computes in float32), as MegEngine's dtype promotion does. `compute_mode` and
`megtrace.config._compute_mode` are accepted; megtrace's kernels always accumulate
float16 in float32, which is what "float32" asks for.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

from .. import config as _config
from .. import dtype as _dt
from ..core.tensor import amp as _amp
from ..dispatch import apply
from ..tensor import Tensor
from ._convert import cast, require_tensor
from .elemwise import add

__all__ = ["conv1d", "conv3d", "conv_transpose2d", "conv_transpose3d", "local_conv2d",
           "deformable_conv2d", "region_restricted_conv"]

IntOrTuple = Union[int, Tuple[int, ...]]


def ntuple(name: str, value, n: int) -> tuple[int, ...]:
    """An int, or a sequence of n ints, as an n-tuple."""
    if isinstance(value, Tensor):
        value = value.numpy().tolist()
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(f"{name}: expected an int or {n} ints, got {value!r}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


_CROSS, _DEFAULT = "cross_correlation", "default"


def check_modes(op: str, conv_mode: str, compute_mode: str = "default") -> str:
    """Validate the mode strings; returns the effective compute mode."""
    if conv_mode is not _CROSS and str(conv_mode).lower() != "cross_correlation":
        raise ValueError(f"{op}: conv_mode must be 'cross_correlation'; got {conv_mode!r}")
    if compute_mode is not _DEFAULT:          # the default arguments skip str().lower()
        compute_mode = str(compute_mode).lower()
    compute_mode = _config._get_actual_op_param(compute_mode, _config._compute_mode)
    if compute_mode not in ("default", "float32"):
        raise ValueError(f"{op}: compute_mode must be 'default' or 'float32'; got "
                         f"{compute_mode!r}")
    return compute_mode


def promote_pair(op: str, inp, weight) -> tuple[Tensor, Tensor]:
    """Input and weight as tensors of their common dtype."""
    inp, weight = require_tensor(op, inp), require_tensor(op, weight)
    a, b = _dt.name_of(inp.dtype), _dt.name_of(weight.dtype)
    dtype = _dt.promote(a, b)
    if a == dtype and b == dtype:       # the common case: nothing to convert
        return inp, weight
    return cast(inp, dtype), cast(weight, dtype)


def _with_bias(out: Tensor, bias: Optional[Tensor]) -> Tensor:
    return out if bias is None else add(out, _amp.low_prec_bias(bias))


def conv1d(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: int = 1,
           padding: int = 0, dilation: int = 1, groups: int = 1,
           conv_mode: str = "cross_correlation", compute_mode: str = "default") -> Tensor:
    """1D convolution over (N, C, L) with a (OC, IC, K) weight; written as conv2d on a
    trailing unit axis, exactly as MegEngine runs and dumps it."""
    from .nn import conv2d
    check_modes("conv1d", conv_mode, compute_mode)
    inp, weight = promote_pair("conv1d", inp, weight)
    if inp.ndim != 3:
        raise AssertionError("the input dimension of conv1d should be 3")
    if weight.ndim != 3:
        raise AssertionError("the weight dimension of conv1d should be 3")
    if bias is not None and bias.ndim != 3:
        raise AssertionError("the bias dimension of conv1d should be 3")
    if groups != 1:
        raise ValueError(f"conv1d: groups={groups} needs a grouped weight, which MegEngine's "
                         "conv1d does not accept (its weight must be 3-d)")
    (s,), (p,), (d,) = (ntuple("stride", stride, 1), ntuple("padding", padding, 1),
                        ntuple("dilation", dilation, 1))
    x4 = apply("expand_dims", inp, axis=(3,))
    w4 = apply("expand_dims", weight, axis=(3,))
    out = conv2d(x4, w4, None, (s, 1), (p, 0), (d, 1), 1, conv_mode, compute_mode)
    return _with_bias(apply("squeeze", out, axis=(3,)), bias)


def _check_groups(op: str, weight: Tensor, groups: int, dense_ndim: int) -> None:
    if groups != 1 and weight.ndim != dense_ndim + 1:
        raise ValueError(f"{op}: with groups={groups} the weight must be {dense_ndim + 1}-d "
                         f"(groups first); got shape {weight.shape}")
    if weight.ndim == dense_ndim + 1 and weight.shape[0] != groups:
        raise ValueError(f"{op}: weight has {weight.shape[0]} groups, groups={groups}")


def conv3d(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
           stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
           groups: int = 1, conv_mode: str = "cross_correlation") -> Tensor:
    """3D convolution (NCDHW); weight (OC, IC, KD, KH, KW), grouped
    (groups, OC/groups, IC/groups, KD, KH, KW)."""
    check_modes("conv3d", conv_mode)
    inp, weight = promote_pair("conv3d", inp, weight)
    _check_groups("conv3d", weight, groups, 5)
    out = apply("conv3d", inp, weight, stride=ntuple("stride", stride, 3),
                padding=ntuple("padding", padding, 3),
                dilation=ntuple("dilation", dilation, 3))
    return _with_bias(out, bias)


def _conv_transpose(nd: int, inp, weight, bias, stride, padding, output_padding, dilation,
                    groups) -> Tensor:
    op = f"conv_transpose{nd}d"
    inp, weight = promote_pair(op, inp, weight)
    _check_groups(op, weight, groups, nd + 2)
    out = apply(op, inp, weight, stride=ntuple("stride", stride, nd),
                padding=ntuple("padding", padding, nd),
                output_padding=ntuple("output_padding", output_padding, nd),
                dilation=ntuple("dilation", dilation, nd))
    return _with_bias(out, bias)


def conv_transpose2d(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                     groups: int = 1, conv_mode: str = "cross_correlation",
                     compute_mode: str = "default") -> Tensor:
    """2D transposed convolution (deconvolution); weight (IC, OC, KH, KW), grouped
    (groups, IC/groups, OC/groups, KH, KW). Output size
    (H - 1) * stride - 2 * padding + dilation * (KH - 1) + output_padding + 1.

    As in MegEngine 1.13, output_padding applies only when its height part is non-zero
    (MegEngine tests `output_pad_h != 0 or output_pad_h != 0`): a width-only padding such
    as (0, 1) is ignored, so models trained in MegEngine keep their output shapes."""
    check_modes("conv_transpose2d", conv_mode, compute_mode)
    pad_h, pad_w = ntuple("output_padding", output_padding, 2)
    return _conv_transpose(2, inp, weight, bias, stride, padding,
                           (pad_h, pad_w) if pad_h != 0 else (0, 0), dilation, groups)


def conv_transpose3d(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                     groups: int = 1) -> Tensor:
    """3D transposed convolution; weight (IC, OC, KD, KH, KW), grouped
    (groups, IC/groups, OC/groups, KD, KH, KW)."""
    return _conv_transpose(3, inp, weight, bias, stride, padding, output_padding, dilation,
                           groups)


def local_conv2d(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                 stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                 conv_mode: str = "cross_correlation") -> Tensor:
    """Locally connected 2D convolution: every output position has its own kernel;
    weight (groups, OH, OW, IC/groups, KH, KW, OC/groups)."""
    check_modes("local_conv2d", conv_mode)
    inp, weight = promote_pair("local_conv2d", inp, weight)
    out = apply("local_conv2d", inp, weight, stride=ntuple("stride", stride, 2),
                padding=ntuple("padding", padding, 2), dilation=ntuple("dilation", dilation, 2))
    return _with_bias(out, bias)


def deformable_conv2d(inp: Tensor, weight: Tensor, offset: Tensor, mask: Tensor,
                      bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
                      padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1,
                      conv_mode: str = "cross_correlation",
                      compute_mode: str = "default") -> Tensor:
    """Deformable convolution (v2): each kernel tap samples the input bilinearly at its
    position plus `offset` (N, 2*dg*KH*KW, OH, OW; (dy, dx) pairs) and is scaled by
    `mask` (N, dg*KH*KW, OH, OW); dg (deformable groups) is read from the offset."""
    check_modes("deformable_conv2d", conv_mode, compute_mode)
    inp, weight = promote_pair("deformable_conv2d", inp, weight)
    _check_groups("deformable_conv2d", weight, groups, 4)
    offset = cast(require_tensor("deformable_conv2d", offset), "float32")
    mask = cast(require_tensor("deformable_conv2d", mask), "float32")
    out = apply("deformable_conv2d", inp, weight, offset, mask,
                stride=ntuple("stride", stride, 2), padding=ntuple("padding", padding, 2),
                dilation=ntuple("dilation", dilation, 2))
    return _with_bias(out, bias)


def region_restricted_conv(inp: Tensor, weight: Tensor, rin: Tensor, rout: Tensor,
                           bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
                           padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1,
                           conv_mode: str = "cross_correlation",
                           compute_mode: str = "default") -> Tensor:
    """Grouped 2D convolution in which an input pixel reaches an output pixel only when
    their region ids agree (`rin` (N, IH, IW), `rout` (N, OH, OW), both int32 or both
    uint8); weight (groups, OC/groups, IC/groups, KH, KW); stride 1 only, as in
    MegEngine. See megtrace/ops/region_conv.py."""
    assert str(conv_mode).lower() == "cross_correlation"
    check_modes("region_restricted_conv", conv_mode, compute_mode)
    assert groups > 0, ("RegionRestrictedConv expected grouped conv mode, which requires "
                        "groups > 0, but got groups=%d" % groups)
    inp, weight = promote_pair("region_restricted_conv", inp, weight)
    _check_groups("region_restricted_conv", weight, groups, 4)
    out = apply("region_restricted_conv", inp, weight,
                require_tensor("region_restricted_conv", rin),
                require_tensor("region_restricted_conv", rout),
                stride=ntuple("stride", stride, 2), padding=ntuple("padding", padding, 2),
                dilation=ntuple("dilation", dilation, 2))
    return out if bias is None else add(out, bias)
