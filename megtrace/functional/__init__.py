"""`megtrace.functional` (imported as `F`): MegEngine's functional API on megtrace."""
from . import nn
from .elemwise import *  # noqa: F401,F403
from .elemwise import __all__ as _elemwise_all
from .nn import avg_pool2d, batch_norm, conv2d, linear, matmul, max_pool2d
from .reduction import max, mean, min, prod, sum  # noqa: A004
from .tensor_ops import astype, concat, expand_dims, flatten, reshape, squeeze

__all__ = ["nn", "avg_pool2d", "batch_norm", "conv2d", "linear", "matmul", "max_pool2d",
           "astype", "concat", "expand_dims", "flatten", "reshape", "squeeze",
           "max", "mean", "min", "prod", "sum", *_elemwise_all]
