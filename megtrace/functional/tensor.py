"""MegEngine's module path `megengine.functional.tensor`: its tensor-making and layout
functions, implemented in tensor_ops.py, tensor_extra.py, complex.py and math.py."""
from .complex import complex, imag, polar, real  # noqa: A004
from .math import cumsum
from .tensor_extra import (copy, cond_take, diag, eye, gather, meshgrid, repeat, roll, scatter,
                           swapaxes, tile)
from .tensor_ops import (arange, broadcast_to, concat, expand_dims, flatten, full, full_like,
                         linspace, ones, ones_like, reshape, split, squeeze, stack, transpose,
                         where, zeros, zeros_like)

__all__ = ["arange", "broadcast_to", "concat", "cond_take", "copy", "cumsum", "diag",
           "expand_dims", "eye", "flatten", "full", "full_like", "gather", "imag", "linspace",
           "meshgrid", "ones", "ones_like", "polar", "repeat", "reshape", "roll", "scatter",
           "split", "squeeze", "stack", "swapaxes", "tile", "transpose", "complex", "real",
           "where", "zeros", "zeros_like"]
