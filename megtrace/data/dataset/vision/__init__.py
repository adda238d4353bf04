"""Vision datasets read from local files (megtrace downloads nothing)."""
from .cifar import CIFAR10, CIFAR100
from .folder import ImageFolder
from .imagenet import ImageNet
from .meta_vision import VisionDataset
from .mnist import MNIST

__all__ = ["CIFAR10", "CIFAR100", "ImageFolder", "ImageNet", "MNIST", "VisionDataset"]
