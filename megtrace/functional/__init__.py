"""`megtrace.functional` (imported as `F`): MegEngine's functional API on megtrace."""
from . import loss, nn, vision
from .complex import *  # noqa: F401,F403
from .complex import __all__ as _complex_all
from .conv import *  # noqa: F401,F403
from .conv import __all__ as _conv_all
from .elemwise import *  # noqa: F401,F403
from .elemwise import __all__ as _elemwise_all
from .elemwise_extra import *  # noqa: F401,F403
from .elemwise_extra import __all__ as _elemwise_extra_all
from .math_extra import *  # noqa: F401,F403
from .math_extra import __all__ as _math_extra_all
from .math import *  # noqa: F401,F403
from .math import __all__ as _math_all
from .nn import *  # noqa: F401,F403
from .nn import __all__ as _nn_all
from .reduction import max, mean, min, prod, sum  # noqa: A004
from .tensor_extra import *  # noqa: F401,F403
from .tensor_extra import __all__ as _tensor_extra_all
from .tensor_ops import *  # noqa: F401,F403
from .tensor_ops import __all__ as _tensor_all

__all__ = ["loss", "nn", "vision", "max", "mean", "min", "prod", "sum", *_elemwise_all, *_math_all,
           *_nn_all, *_tensor_all]
__all__ += _elemwise_extra_all + _math_extra_all + _tensor_extra_all + _conv_all + _complex_all

from .attention import multi_head_attention  # noqa: E402  (F.nn.multi_head_attention)

__all__.append("multi_head_attention")

from .correlation import correlation  # noqa: E402  (F.vision / F.nn.correlation)

from .accuracy import topk_accuracy  # noqa: E402  (F.topk_accuracy; metric/utils re-export it)

__all__.append("topk_accuracy")

from . import quantized  # noqa: E402,F401  (F.quantized: inference-only quantized convolutions)

from . import debug_param, metric, tensor, utils  # noqa: E402,F401  (MegEngine's paths of their own)

# MegEngine's submodules hold these names too (`from megengine.functional.elemwise import
# clip`); megtrace defines them elsewhere, so they are bound here, once every module is loaded
# (never a Python builtin's name: these become the module's globals).
_ALSO_IN = {
    elemwise: ["acos", "asin", "atan", "atan2", "asinh", "acosh", "atanh", "clip", "cosh",
               "equal", "greater", "greater_equal", "left_shift", "less", "less_equal",
               "logical_and", "logical_not", "logical_or", "logical_xor", "logaddexp",
               "not_equal", "right_shift", "sinh", "tan"],
    math: ["argsort", "dot", "matinv", "matmul", "mean", "norm", "normalize", "prod", "sign",
           "sort", "std", "svd", "var"],      # max/min/sum: math.py's own __getattr__
    nn: ["gelu", "hsigmoid", "hswish", "logsigmoid", "logsumexp", "normalize", "relu6",
         "sigmoid", "silu", "softplus", "multi_head_attention", "correlation", *_conv_all],
    vision: ["correlation"],
}
for _module, _names in _ALSO_IN.items():
    for _name in _names:
        setattr(_module, _name, globals()[_name])
    _module.__all__ = [*_module.__all__, *(n for n in _names if n not in _module.__all__)]
