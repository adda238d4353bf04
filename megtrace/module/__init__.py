"""`megtrace.module` (imported as `M`): MegEngine's layers."""
from .activation import (GELU, AdaptiveAvgPool2d, AdaptiveMaxPool2d, Dropout, Embedding,
                         Identity, LayerNorm, LeakyReLU, Sigmoid, SiLU, Softmax)
from .layers import AvgPool2d, BatchNorm2d, Conv2d, Linear, MaxPool2d, ReLU, Sequential
from .module import Module

__all__ = ["GELU", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool2d", "BatchNorm2d",
           "Conv2d", "Dropout", "Embedding", "Identity", "LayerNorm", "LeakyReLU", "Linear",
           "MaxPool2d", "Module", "ReLU", "Sequential", "SiLU", "Sigmoid", "Softmax"]
