"""Vision datasets read from local files (megtrace downloads nothing)."""
from .cifar import CIFAR10, CIFAR100
from .cityscapes import Cityscapes
from .coco import COCO
from .folder import ImageFolder
from .imagenet import ImageNet
from .meta_vision import VisionDataset
from .mnist import MNIST
from .objects365 import Objects365
from .voc import PascalVOC

__all__ = ["CIFAR10", "CIFAR100", "Cityscapes", "COCO", "ImageFolder", "ImageNet", "MNIST", "Objects365",
           "PascalVOC", "VisionDataset"]
