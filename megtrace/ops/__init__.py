"""The operator registry; importing this package declares every operator once."""
from . import activation, elemwise, image, indexing, linalg, nn, reduce, shape  # noqa: F401
from . import math_extra, sort_linalg, tensor_extra  # noqa: F401  (math/tensor functionals)
from . import random  # noqa: F401  (megtrace.random's generators)
from . import random_perm  # noqa: F401  (PermutationRNG, ShuffleRNG)
from . import random_dropout  # noqa: F401  (Dropout)
from . import advanced_indexing  # noqa: F401  (Tensor indexing: core)
from . import color, detection, onehot, warp, window  # noqa: F401  (image/vision ops: nn)
from . import shape_exprs  # noqa: F401
from . import dynamic_shape  # noqa: F401  (value-dependent shapes: cond_take)
from . import conv  # noqa: F401  (convolution family: module)
from . import ranges  # noqa: F401  (linspace of a traced length)
from . import nchwxx  # noqa: F401  (NCHW88/NCHW44 layouts: optimize_for_inference)
from . import nhwcd4  # noqa: F401  (NHWCD4 image layout: optimize_for_inference)
from . import indexing_incr  # noqa: F401  (gradient of gathers)
from . import quant  # noqa: F401  (fake quantization: quantization)
from . import quantized  # noqa: F401  (ops on MegEngine's quantized dtypes: module.quantized)
from . import quantized_batch_conv  # noqa: F401  (F.quantized.batch_conv_bias_activation)
from . import region_conv  # noqa: F401  (F.nn.region_restricted_conv)
from . import complex  # noqa: F401  (complex64: F.polar, eager only)
from . import norm13  # noqa: F401  (GeneralNorm, LRN: F.nn.general_norm, local_response_norm)
from . import recurrent  # noqa: F401  (RNNForward, LSTMForward: M.RNN, M.LSTM)
from . import attention  # noqa: F401  (MultiHeadAttn: F.nn.multi_head_attention)
from .registry import (NOT_DIFFERENTIABLE, MgeChoice, MgeComposite, MgeOpr, OpDef, all_ops, get,
                       register)

__all__ = ["NOT_DIFFERENTIABLE", "MgeChoice", "MgeComposite", "MgeOpr", "OpDef", "all_ops", "get",
           "register"]
