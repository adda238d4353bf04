"""Geometric vision transforms: Pad, resizes, crops and flips (images, masks and coordinates together)."""
from __future__ import annotations

import collections.abc
import math
from typing import Tuple

import cv2
import numpy as np

from . import functional as F
from .base import VisionTransform


def _pair(size):
    return (size, size) if isinstance(size, int) else size


class Pad(VisionTransform):
    """Constant padding: int (all sides), (bottom, right) or (top, bottom, left, right)."""

    def __init__(self, size=0, value=0, mask_value=0, *, order=None):
        super().__init__(order)
        if isinstance(size, int):
            size = (size, size, size, size)
        elif isinstance(size, collections.abc.Sequence) and len(size) == 2:
            size = (0, size[0], 0, size[1])
        elif not (isinstance(size, collections.abc.Sequence) and len(size) == 4):
            raise ValueError("size should be a list/tuple which contains (top, down, left, right) four pad sizes.")
        self.size = size
        self.value = value
        if not isinstance(mask_value, int):
            raise ValueError("mask_value should be a positive integer, but got mask_value={}".format(mask_value))
        self.mask_value = mask_value

    def _apply_image(self, image):
        return F.pad(image, self.size, self.value)

    def _apply_coords(self, coords):
        coords[:, 0] += self.size[2]
        coords[:, 1] += self.size[0]
        return coords

    def _apply_mask(self, mask):
        return F.pad(mask, self.size, self.mask_value)


class _ResizeBase(VisionTransform):
    """Resizes whose target (th, tw) ``_get_shape`` picks once per sample; masks use nearest neighbour."""

    interpolation = cv2.INTER_LINEAR

    def _get_shape(self, image) -> Tuple[int, int, int, int]:
        raise NotImplementedError

    def apply(self, input: Tuple):
        self._shape_info = self._get_shape(self._get_image(input))
        return super().apply(input)

    def _unchanged(self) -> bool:
        h, w, th, tw = self._shape_info
        return h == th and w == tw

    def _apply_image(self, image):
        return image if self._unchanged() else F.resize(image, self._shape_info[2:], self.interpolation)

    def _apply_coords(self, coords):
        if self._unchanged():
            return coords
        h, w, th, tw = self._shape_info
        coords[:, 0] = coords[:, 0] * (tw / w)
        coords[:, 1] = coords[:, 1] * (th / h)
        return coords

    def _apply_mask(self, mask):
        return mask if self._unchanged() else F.resize(mask, self._shape_info[2:], cv2.INTER_NEAREST)


class Resize(_ResizeBase):
    """To (h, w), or with an int the shorter side becomes ``output_size`` (longer side truncated)."""

    def __init__(self, output_size, interpolation=cv2.INTER_LINEAR, *, order=None):
        super().__init__(order)
        self.output_size = output_size
        self.interpolation = interpolation

    def _get_shape(self, image):
        h, w, _ = image.shape
        size = self.output_size
        if not isinstance(size, int):
            return (h, w, *size)
        if min(h, w) == size:
            return h, w, h, w
        if h < w:
            return h, w, size, int(size * w / h)
        return h, w, int(size * h / w), size


class ShortestEdgeResize(_ResizeBase):
    """Shorter side to a random size from ``min_size`` (range or choice), longer side capped at ``max_size``."""

    def __init__(self, min_size, max_size, sample_style="range", interpolation=cv2.INTER_LINEAR, *, order=None):
        super().__init__(order)
        if sample_style not in ("range", "choice"):
            raise NotImplementedError("{} is unsupported sample style".format(sample_style))
        self.sample_style = sample_style
        self.min_size = (min_size, min_size) if isinstance(min_size, int) else min_size
        self.max_size = max_size
        self.interpolation = interpolation

    def _get_shape(self, image):
        h, w, _ = image.shape
        if self.sample_style == "range":
            size = np.random.randint(self.min_size[0], self.min_size[1] + 1)
        else:
            size = np.random.choice(self.min_size)
        scale = size / min(h, w)
        th, tw = (size, scale * w) if h < w else (scale * h, size)
        if max(th, tw) > self.max_size:
            shrink = self.max_size / max(th, tw)
            th, tw = th * shrink, tw * shrink
        return h, w, int(round(th)), int(round(tw))


class RandomResize(_ResizeBase):
    """Both sides scaled by one factor drawn uniformly from ``scale_range``."""

    def __init__(self, scale_range, interpolation=cv2.INTER_LINEAR, *, order=None):
        super().__init__(order)
        self.scale_range = scale_range
        self.interpolation = interpolation

    def _get_shape(self, image):
        h, w, _ = image.shape
        scale = np.random.uniform(*self.scale_range)
        return h, w, int(round(h * scale)), int(round(w * scale))


class RandomCrop(VisionTransform):
    """Pad by ``padding_size``, then crop ``output_size`` at a random place (padding again if too small)."""

    def __init__(self, output_size, padding_size=0, padding_value=[0, 0, 0], padding_maskvalue=0, *, order=None):
        super().__init__(order)
        self.output_size = _pair(output_size)
        self.pad = Pad(padding_size, padding_value, order=self.order)
        self.padding_value = padding_value
        self.padding_maskvalue = padding_maskvalue

    def apply(self, input):
        input = self.pad.apply(input)
        self._h, self._w, _ = self._get_image(input).shape
        self._th, self._tw = self.output_size
        self._x = np.random.randint(0, max(0, self._w - self._tw) + 1)
        self._y = np.random.randint(0, max(0, self._h - self._th) + 1)
        return super().apply(input)

    def _crop(self, array, value):
        if self._th > self._h:
            array = F.pad(array, (self._th - self._h, 0), value)
        if self._tw > self._w:
            array = F.pad(array, (0, self._tw - self._w), value)
        return array[self._y:self._y + self._th, self._x:self._x + self._tw]

    def _apply_image(self, image):
        return self._crop(image, self.padding_value)

    def _apply_coords(self, coords):
        coords[:, 0] -= self._x
        coords[:, 1] -= self._y
        return coords

    def _apply_mask(self, mask):
        return self._crop(mask, self.padding_maskvalue)


class RandomResizedCrop(VisionTransform):
    """Crop a random area fraction/aspect ratio (10 attempts, then a centred fallback), resize to output."""

    def __init__(self, output_size, scale_range=(0.08, 1.0), ratio_range=(3.0 / 4, 4.0 / 3),
                 interpolation=cv2.INTER_LINEAR, *, order=None):
        super().__init__(order)
        self.output_size = _pair(output_size)
        assert scale_range[0] <= scale_range[1], "scale_range should be of kind (min, max)"
        assert ratio_range[0] <= ratio_range[1], "ratio_range should be of kind (min, max)"
        self.scale_range = scale_range
        self.ratio_range = ratio_range
        self.interpolation = interpolation

    def apply(self, input: Tuple):
        self._coord_info = self._get_coord(self._get_image(input))
        return super().apply(input)

    def _apply_image(self, image):
        x, y, w, h = self._coord_info
        return F.resize(image[y:y + h, x:x + w], self.output_size, self.interpolation)

    def _apply_coords(self, coords):
        x, y, w, h = self._coord_info
        coords[:, 0] = (coords[:, 0] - x) * self.output_size[1] / w
        coords[:, 1] = (coords[:, 1] - y) * self.output_size[0] / h
        return coords

    def _apply_mask(self, mask):
        x, y, w, h = self._coord_info
        return F.resize(mask[y:y + h, x:x + w], self.output_size, cv2.INTER_NEAREST)

    def _get_coord(self, image, attempts=10):
        height, width, _ = image.shape
        area = height * width
        log_ratio = tuple(math.log(r) for r in self.ratio_range)
        for _ in range(attempts):
            target = np.random.uniform(*self.scale_range) * area
            aspect = math.exp(np.random.uniform(*log_ratio))
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return np.random.randint(0, width - w + 1), np.random.randint(0, height - h + 1), w, h
        ratio = width / height
        w, h = width, height
        if ratio < min(self.ratio_range):
            h = int(round(w / min(self.ratio_range)))
        elif ratio > max(self.ratio_range):
            w = int(round(h * max(self.ratio_range)))
        return (width - w) // 2, (height - h) // 2, w, h


class CenterCrop(VisionTransform):
    """Crop ``output_size`` from the centre (rounded offsets); refuses a crop bigger than the image."""

    def __init__(self, output_size, *, order=None):
        super().__init__(order)
        self.output_size = _pair(output_size)

    def apply(self, input: Tuple):
        th, tw = self.output_size
        h, w, _ = self._get_image(input).shape
        assert th <= h and tw <= w, "output size is bigger than image size"
        self._coord_info = (int(round((w - tw) / 2.0)), int(round((h - th) / 2.0)))
        return super().apply(input)

    def _apply_image(self, image):
        x, y = self._coord_info
        th, tw = self.output_size
        return image[y:y + th, x:x + tw]

    def _apply_coords(self, coords):
        coords[:, 0] -= self._coord_info[0]
        coords[:, 1] -= self._coord_info[1]
        return coords

    _apply_mask = _apply_image


class RandomHorizontalFlip(VisionTransform):
    """Mirror left-right with probability ``prob``."""

    _axis, _code = 1, 1

    def __init__(self, prob: float = 0.5, *, order=None):
        super().__init__(order)
        self.prob = prob

    def apply(self, input: Tuple):
        self._flipped = np.random.random() < self.prob
        self._extent = self._get_image(input).shape[self._axis]
        return super().apply(input)

    def _apply_image(self, image):
        return F.flip(image, flipCode=self._code) if self._flipped else image

    def _apply_coords(self, coords):
        if self._flipped:
            col = 1 - self._axis
            coords[:, col] = self._extent - coords[:, col]
        return coords

    _apply_mask = _apply_image


class RandomVerticalFlip(RandomHorizontalFlip):
    """Mirror top-bottom with probability ``prob``."""

    _axis, _code = 0, 0
