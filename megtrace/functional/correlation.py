"""`F.nn.correlation` (also `F.vision.correlation`): MegEngine 1.13's Correlation (the
FlowNet cost volume), composed of registry ops: per displacement, the product (or
absolute difference) of data1 and shifted data2 over the zero-padded inputs, averaged
over channels and the kernel window (an average pooling with stride1). This is exactly
MegEngine's kernel: its out-of-bounds taps read 0, as the zero padding does."""
from __future__ import annotations

from ..tensor import Tensor
from ._convert import require_tensor
from .elemwise import abs as _abs
from .nn import avg_pool2d, pad
from .tensor_ops import concat

__all__ = ["correlation"]


def _output_size(size: int, pad_size: int, border: int, stride1: int) -> int:
    """MegEngine: ceil((size + 2 * pad - 2 * border) / stride1), in float32."""
    import math
    return int(math.ceil(float(size + 2 * pad_size - 2 * border) / float(stride1)))


def correlation(data1: Tensor, data2: Tensor, kernel_size: int = 1, max_displacement: int = 1,
                stride1: int = 1, stride2: int = 1, pad_size: int = 0,
                is_multiply: bool = True) -> Tensor:
    """(N, (2 * (max_displacement // stride2) + 1) ** 2, H', W') NCHW cost volume; channel
    c is the displacement ((c % grid) - r, (c // grid) - r) * stride2 in (x, y). An even
    kernel_size works as the odd size below it, as in MegEngine's kernel."""
    a, b = require_tensor("correlation", data1), require_tensor("correlation", data2)
    if a.ndim != 4 or b.ndim != 4 or tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"correlation: data1 and data2 must be NCHW tensors of one shape; "
                         f"got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype.kind != "f":
        raise TypeError(f"correlation: data1 and data2 must share a float dtype; got "
                        f"{a.dtype} and {b.dtype}")
    for name, value in (("kernel_size", kernel_size), ("max_displacement", max_displacement),
                        ("stride1", stride1), ("stride2", stride2), ("pad_size", pad_size)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"correlation: {name} must be a non-negative int; got {value!r}")
    if kernel_size < 1 or stride1 < 1 or stride2 < 1:
        raise ValueError("correlation: kernel_size, stride1 and stride2 must be at least 1")
    radius = (kernel_size - 1) // 2
    # MegEngine's kernel reads the taps -radius..radius: an even kernel_size k acts as k - 1
    kernel_size = 2 * radius + 1
    border = max_displacement + radius
    height = _output_size(a.shape[2], pad_size, border, stride1)
    width = _output_size(a.shape[3], pad_size, border, stride1)
    if height < 1 or width < 1:
        raise ValueError(f"correlation: the input {tuple(a.shape)} with pad_size={pad_size} "
                         f"is smaller than the border 2 * (max_displacement + kernel radius) "
                         f"= {2 * border}")
    grid_radius = max_displacement // stride2
    grid = 2 * grid_radius + 1
    if pad_size:
        widths = ((0, 0), (0, 0), (pad_size, pad_size), (pad_size, pad_size))
        a, b = pad(a, widths), pad(b, widths)
    span_h = (height - 1) * stride1 + kernel_size      # rows the kernel windows cover
    span_w = (width - 1) * stride1 + kernel_size
    top, left = max_displacement, max_displacement
    window = a[:, :, top:top + span_h, left:left + span_w]
    planes = []
    for c in range(grid * grid):
        dx = (c % grid - grid_radius) * stride2
        dy = (c // grid - grid_radius) * stride2
        shifted = b[:, :, top + dy:top + dy + span_h, left + dx:left + dx + span_w]
        cost = window * shifted if is_multiply else _abs(window - shifted)
        cost = cost.mean(axis=1, keepdims=True)
        planes.append(avg_pool2d(cost, kernel_size, stride=stride1, mode="average"))
    return concat(planes, axis=1)
