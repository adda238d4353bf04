"""MegEngine's module path `megengine.data.transform.vision.transform`: the vision
transforms, implemented in base.py, geometry.py and color.py."""
from .base import Compose, TorchTransformCompose, ToMode, VisionTransform
from .color import (BrightnessTransform, ColorJitter, ContrastTransform, GaussianNoise,
                    HueTransform, Lighting, Normalize, SaturationTransform)
from .geometry import (CenterCrop, Pad, RandomCrop, RandomHorizontalFlip, RandomResize,
                       RandomResizedCrop, RandomVerticalFlip, Resize, ShortestEdgeResize)

__all__ = ["VisionTransform", "ToMode", "Compose", "TorchTransformCompose", "Pad", "Resize",
           "ShortestEdgeResize", "RandomResize", "RandomCrop", "RandomResizedCrop",
           "CenterCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "Normalize",
           "GaussianNoise", "BrightnessTransform", "SaturationTransform", "ContrastTransform",
           "HueTransform", "ColorJitter", "Lighting"]
