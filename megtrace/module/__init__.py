"""`megtrace.module` (imported as `M`): MegEngine's layers."""
from .layers import AvgPool2d, BatchNorm2d, Conv2d, Linear, MaxPool2d, ReLU, Sequential
from .module import Module

__all__ = ["AvgPool2d", "BatchNorm2d", "Conv2d", "Linear", "MaxPool2d", "Module", "ReLU",
           "Sequential"]
