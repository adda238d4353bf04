"""megengine.data.transform.vision: OpenCV-based transforms on (H, W, C) BGR images."""
from .base import Compose, TorchTransformCompose, ToMode, VisionTransform
from .color import (BrightnessTransform, ColorJitter, ContrastTransform, GaussianNoise, HueTransform, Lighting,
                    Normalize, SaturationTransform)
from .geometry import (CenterCrop, Pad, RandomCrop, RandomHorizontalFlip, RandomResize, RandomResizedCrop,
                       RandomVerticalFlip, Resize, ShortestEdgeResize)

__all__ = ["VisionTransform", "ToMode", "Compose", "TorchTransformCompose", "Pad", "Resize", "ShortestEdgeResize",
           "RandomResize", "RandomCrop", "RandomResizedCrop", "CenterCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "Normalize", "GaussianNoise", "BrightnessTransform", "SaturationTransform",
           "ContrastTransform", "HueTransform", "ColorJitter", "Lighting"]
