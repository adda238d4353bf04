"""Photometric vision transforms: Normalize, GaussianNoise, colour jitter and PCA lighting (BGR images)."""
from __future__ import annotations

import cv2
import numpy as np

from . import functional as F
from .base import Compose, VisionTransform, _KeepsGeometry


class Normalize(_KeepsGeometry, VisionTransform):
    """(image - mean) / std with float32 mean/std (per channel or scalar)."""

    def __init__(self, mean=0.0, std=1.0, *, order=None):
        super().__init__(order)
        self.mean = np.array(mean, dtype=np.float32)
        self.std = np.array(std, dtype=np.float32)

    def _apply_image(self, image):
        return (image - self.mean) / self.std


class GaussianNoise(_KeepsGeometry, VisionTransform):
    """Adds N(mean, std) * 255 noise, clipped to [0, 255], dtype kept."""

    def __init__(self, mean=0.0, std=1.0, *, order=None):
        super().__init__(order)
        self.mean = np.array(mean, dtype=np.float32)
        self.std = np.array(std, dtype=np.float32)

    def _apply_image(self, image):
        noise = (np.random.normal(self.mean, self.std, image.shape) * 255).astype(np.float32)
        return np.clip(image + noise, 0, 255).astype(image.dtype)


class _Jitter(_KeepsGeometry, VisionTransform):
    """Blend the image with ``_target`` by a factor alpha ~ U(max(0, 1 - value), 1 + value)."""

    _name = ""

    def __init__(self, value, *, order=None):
        super().__init__(order)
        if value < 0:
            raise ValueError("{} value should be non-negative".format(self._name))
        self.value = value

    def _target(self, image):
        return 0.0

    def _apply_image(self, image):
        if self.value == 0:
            return image
        dtype = image.dtype
        image = image.astype(np.float32)
        alpha = np.random.uniform(max(0, 1 - self.value), 1 + self.value)
        return (image * alpha + self._target(image) * (1 - alpha)).clip(0, 255).astype(dtype)


class BrightnessTransform(_Jitter):
    """Scale intensities (blend with black)."""

    _name = "brightness"


class ContrastTransform(_Jitter):
    """Blend with the mean gray level."""

    _name = "contrast"

    def _target(self, image):
        return F.to_gray(image).mean()


class SaturationTransform(_Jitter):
    """Blend with the gray image."""

    _name = "saturation"

    def _target(self, image):
        return F.to_gray(image)


class HueTransform(_KeepsGeometry, VisionTransform):
    """Shift OpenCV's full-range hue by U(-value, value) * 255 (uint8 wrap-around)."""

    def __init__(self, value, *, order=None):
        super().__init__(order)
        if value < 0 or value > 0.5:
            raise ValueError("hue value should be in [0.0, 0.5]")
        self.value = value

    def _apply_image(self, image):
        if self.value == 0:
            return image
        dtype = image.dtype
        hsv = cv2.cvtColor(image.astype(np.uint8), cv2.COLOR_BGR2HSV_FULL)
        # truncated toward zero, then wrapped to uint8 as NumPy 1.x's np.uint8(float) did
        shift = np.uint8(int(np.random.uniform(-self.value, self.value) * 255) % 256)
        hsv[..., 0] = hsv[..., 0] + shift  # uint8 arithmetic: hue wraps around
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR_FULL).astype(dtype)


class ColorJitter(VisionTransform):
    """Brightness, contrast, saturation and hue jitters (the non-zero ones) in a random order."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0, *, order=None):
        super().__init__(order)
        parts = [cls(v) for cls, v in ((BrightnessTransform, brightness), (ContrastTransform, contrast),
                                       (SaturationTransform, saturation), (HueTransform, hue)) if v != 0]
        self.transforms = Compose(parts, shuffle_indices=[tuple(range(1, len(parts) + 1))], order=order)

    def apply(self, input):
        return self.transforms.apply(input)


class Lighting(_KeepsGeometry, VisionTransform):
    """AlexNet-style PCA lighting noise with ImageNet's eigenvectors (rows in BGR order)."""

    _EIGVEC = np.array([[-0.5836, -0.6948, 0.4203], [-0.5808, -0.0045, -0.8140], [-0.5675, 0.7192, 0.4009]])
    _EIGVAL = np.array([0.2175, 0.0188, 0.0045])

    def __init__(self, scale, *, order=None):
        super().__init__(order)
        if scale < 0:
            raise ValueError("lighting scale should be non-negative")
        self.scale = scale
        self.eigvec = self._EIGVEC.copy()
        self.eigval = self._EIGVAL.copy()

    def _apply_image(self, image):
        if self.scale == 0:
            return image
        dtype = image.dtype
        alpha = np.random.normal(scale=self.scale * 255, size=3)
        shifted = image.astype(np.float32) + self.eigvec.dot(alpha * self.eigval)
        return shifted.clip(0, 255).astype(dtype)
