"""`megtrace.module` (imported as `M`): MegEngine's layers."""
from . import init
from .activation import (GELU, AdaptiveAvgPool2d, AdaptiveMaxPool2d, Dropout, Embedding,
                         Identity, LeakyReLU, PReLU, Sigmoid, SiLU, Softmax)
from .batch_matmul_activation import BatchMatMulActivation
from .batchnorm import BatchNorm1d, BatchNorm2d, SyncBatchNorm
from .conv import (Conv1d, Conv2d, Conv3d, ConvRelu2d, ConvTranspose2d, ConvTranspose3d,
                   ConvTransposeRelu2d, DeformableConv2d, LocalConv2d,
                   RegionRestrictedConv)
from .concat import Concat
from .conv_bn import (ConvBn2d, ConvBnRelu2d, ConvTransposeBn2d, ConvTransposeBnRelu2d,
                      LinearBn1d, LinearBnRelu1d)
from .elemwise import Elemwise
from .layers import AvgPool2d, Linear, LinearRelu, MaxPool2d, ReLU, Sequential
from .module import Module
from .image_layers import (DeformablePSROIPooling, Pad, PixelShuffle, SlidingWindow,
                           SlidingWindowTranspose)
from .normalization import GeneralNorm, GroupNorm, InstanceNorm, LayerNorm, LocalResponseNorm
from .quant_dequant import DequantStub, QuantStub
from .multiheadattn import MultiHeadAttention
from .rnn import LSTM, RNN, LSTMCell, RNNCell

__all__ = ["AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool2d", "BatchMatMulActivation",
           "BatchNorm1d",
           "BatchNorm2d", "Concat", "Conv1d", "Conv2d", "Conv3d", "ConvBn2d", "ConvBnRelu2d",
           "ConvRelu2d", "ConvTranspose2d", "ConvTranspose3d", "ConvTransposeBn2d",
           "ConvTransposeBnRelu2d", "ConvTransposeRelu2d", "DeformableConv2d", "RegionRestrictedConv",
           "DequantStub", "Dropout", "Elemwise", "Embedding", "GELU", "GroupNorm",
           "Identity", "InstanceNorm", "LSTM", "LSTMCell", "LayerNorm", "LeakyReLU",
           "Linear", "LinearBn1d", "LinearBnRelu1d", "LinearRelu", "LocalConv2d",
           "MaxPool2d", "Module", "MultiHeadAttention", "PReLU", "QuantStub", "RNN",
           "RNNCell", "ReLU", "Sequential", "SiLU", "Sigmoid", "Softmax", "SyncBatchNorm",
           "init", "DeformablePSROIPooling", "GeneralNorm", "LocalResponseNorm", "Pad",
           "PixelShuffle", "SlidingWindow", "SlidingWindowTranspose"]

# MegEngine's module paths of their own (`megengine.module.linear`, ...): each names where
# megtrace keeps the classes
from . import (adaptive_pooling, conv_transpose_bn, deformable_psroi_pooling,  # noqa: E402,F401
               dropout, embedding, identity, linear, linear_bn, lrn, padding, pixel_shuffle,
               pooling, sequential, sliding_window)
