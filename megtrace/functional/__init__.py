"""`megtrace.functional` (imported as `F`): MegEngine's functional API on megtrace."""
import sys as _sys
import types as _types
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

# The module MegEngine defines each function in (its __module__): a traced graph prints
# F.relu as `nn.relu` and F.flatten as `tensor.flatten`, and a TracedModule pickled by
# MegEngine names its functions by these paths. From real MegEngine 1.13
# (tests/data/traced_module/megengine_facts.json, "functional_modules").
_MEGENGINE_MODULE = {
    "debug_param": "get_execution_strategy",
    "elemwise": "abs acos acosh add asin asinh atan atan2 atanh ceil clip cos cosh div equal "
                "exp expm1 floor floor_div greater greater_equal left_shift less less_equal "
                "log log1p logaddexp logical_and logical_not logical_or logical_xor maximum "
                "minimum mod mul neg not_equal pow right_shift round sin sinh sqrt square sub "
                "tan tanh",
    "loss": "binary_cross_entropy cross_entropy ctc_loss hinge_loss l1_loss square_loss",
    "math": "argmax argmin argsort dot isinf isnan matinv matmul max mean min norm normalize "
            "prod sign sort std sum svd topk var",
    "metric": "topk_accuracy",
    "nn": "adaptive_avg_pool2d adaptive_max_pool2d avg_pool2d batch_norm conv1d conv2d conv3d "
          "conv_transpose2d conv_transpose3d deformable_conv2d deformable_psroi_pooling dropout "
          "embedding gelu general_norm group_norm hsigmoid hswish indexing_one_hot "
          "instance_norm layer_norm leaky_relu linear local_conv2d local_response_norm "
          "logsigmoid logsoftmax logsumexp max_pool2d multi_head_attention one_hot pad "
          "pixel_shuffle prelu region_restricted_conv relu relu6 sigmoid silu sliding_window "
          "sliding_window_transpose softmax softplus sync_batch_norm",
    "quantized": "batch_conv_bias_activation conv_bias_activation",
    "tensor": "arange broadcast_to complex concat cond_take copy cumsum diag expand_dims eye "
              "flatten full full_like gather imag linspace meshgrid ones ones_like polar real "
              "repeat reshape roll scatter split squeeze stack swapaxes tile transpose where "
              "zeros zeros_like",
    "vision": "correlation cvt_color interpolate nms remap roi_align roi_pooling warp_affine "
              "warp_perspective",
}
for _path, _names in _MEGENGINE_MODULE.items():
    _module = _sys.modules[f"{__name__}.{_path}"]
    for _name in _names.split():
        _func = getattr(_module, _name, None)
        if isinstance(_func, _types.FunctionType):     # pickled by reference from there
            _func.__module__ = _module.__name__
            if "<locals>" in _func.__qualname__:       # made by a factory (F.equal)
                _func.__name__ = _func.__qualname__ = _name
del _path, _names, _module, _name, _func
