"""`megtrace.functional` (imported as `F`): MegEngine's functional API on megtrace."""
from . import nn
from .elemwise import *  # noqa: F401,F403
from .elemwise import __all__ as _elemwise_all
from .nn import avg_pool2d, batch_norm, conv2d, linear, matmul, max_pool2d
from .tensor_ops import astype, concat, flatten, reshape

__all__ = ["nn", "avg_pool2d", "batch_norm", "conv2d", "linear", "matmul", "max_pool2d",
           "astype", "concat", "flatten", "reshape", *_elemwise_all]
