"""VisionTransform (per-field dispatch by ``order``), ToMode, Compose and TorchTransformCompose."""
from __future__ import annotations

import collections.abc
from typing import List, Sequence, Tuple

import cv2
import numpy as np

from ..meta_transform import Transform

_BOX_CORNERS = np.array([(0, 1), (2, 1), (0, 3), (2, 3)]).flatten()


class VisionTransform(Transform):
    """A transform over samples whose fields are named by ``order`` (default ``("image",)``).

    Field kinds: image, boxes, mask, keypoints, polygons (each applied by ``_apply_<kind>``); names ending in
    ``category`` or ``info`` pass through unchanged, as do fields beyond ``order``.
    """

    def __init__(self, order=None):
        super().__init__()
        if order is None:
            order = ("image",)
        elif not isinstance(order, collections.abc.Sequence):
            raise ValueError("order should be a sequence, but got order={}".format(order))
        for key in order:
            if key == "batch":
                raise ValueError("{} is invalid data type".format(key))
            if key.endswith("category") or key.endswith("info"):
                continue
            if self._get_apply(key) is None:
                raise NotImplementedError("{} is unsupported data type".format(key))
        self.order = order

    def apply_batch(self, inputs: Sequence[Tuple]):
        return tuple(self.apply(sample) for sample in inputs)

    def apply(self, input: Tuple):
        fields = input if isinstance(input, tuple) else (input,)
        out = []
        for i, value in enumerate(fields):
            fn = self._get_apply(self.order[i]) if i < len(self.order) else None
            out.append(value if fn is None else fn(value))
        return out[0] if len(out) == 1 else tuple(out)

    def _get_apply(self, key):
        return getattr(self, "_apply_{}".format(key), None)

    def _get_image(self, input: Tuple):
        fields = input if isinstance(input, tuple) else (input,)
        return fields[self.order.index("image")]

    def _apply_image(self, image):
        raise NotImplementedError

    def _apply_coords(self, coords):
        raise NotImplementedError

    def _apply_boxes(self, boxes):
        """Boxes (x0, y0, x1, y1) -> their four corners through ``_apply_coords`` -> bounding boxes again."""
        corners = np.asarray(boxes).reshape(-1, 4)[:, _BOX_CORNERS].reshape(-1, 2)
        corners = self._apply_coords(corners).reshape(-1, 4, 2)
        return np.concatenate((corners.min(axis=1), corners.max(axis=1)), axis=1)

    def _apply_mask(self, mask):
        raise NotImplementedError

    def _apply_keypoints(self, keypoints):
        coords, visibility = keypoints[..., :2], keypoints[..., 2:]
        moved = [self._apply_coords(p) for p in coords]
        return np.concatenate((moved, visibility), axis=-1)

    def _apply_polygons(self, polygons):
        return [[self._apply_coords(p) for p in instance] for instance in polygons]


class _KeepsGeometry:
    """Mixin for colour transforms: coordinates and masks are unchanged."""

    def _apply_coords(self, coords):
        return coords

    def _apply_mask(self, mask):
        return mask


class ToMode(VisionTransform):
    """HWC -> CHW for images and masks (the only mode MegEngine supports)."""

    def __init__(self, mode="CHW", *, order=None):
        super().__init__(order)
        assert mode in ["CHW"], "unsupported mode: {}".format(mode)
        self.mode = mode

    def _apply_image(self, image):
        return np.ascontiguousarray(np.moveaxis(image, 2, 0))

    def _apply_coords(self, coords):
        return coords

    def _apply_mask(self, mask):
        return np.ascontiguousarray(np.moveaxis(mask, 2, 0))


class Compose(VisionTransform):
    """Transforms one after another, all sharing this ``order``.

    ``shuffle_indices``: groups of 1-based positions whose transforms run in a random order each sample;
    ``batch_compose``: apply each transform to the whole batch before the next one.
    """

    def __init__(self, transforms: List[VisionTransform] = [], batch_compose: bool = False,
                 shuffle_indices: List[Tuple] = None, *, order=None):
        super().__init__(order)
        self.transforms = transforms
        self._set_order()
        if batch_compose and shuffle_indices is not None:
            raise ValueError("Do not support shuffle when apply transforms along the whole batch")
        self.batch_compose = batch_compose
        if shuffle_indices is not None:
            shuffle_indices = [tuple(i - 1 for i in group) for group in shuffle_indices]
        self.shuffle_indices = shuffle_indices

    def _set_order(self):
        for t in self.transforms:
            t.order = self.order
            if isinstance(t, Compose):
                t._set_order()

    def apply_batch(self, inputs: Sequence[Tuple]):
        if not self.batch_compose:
            return super().apply_batch(inputs)
        for t in self.transforms:
            inputs = t.apply_batch(inputs)
        return inputs

    def apply(self, input: Tuple):
        for t in self._shuffle():
            input = t.apply(input)
        return input

    def _shuffle(self):
        if self.shuffle_indices is None:
            return self.transforms
        picks = list(range(len(self.transforms)))
        for group in self.shuffle_indices:
            for src, dst in zip(group, np.random.permutation(group).tolist()):
                picks[src] = dst
        return [self.transforms[i] for i in picks]


class TorchTransformCompose(VisionTransform):
    """torchvision transforms on a BGR image through PIL (needs Pillow; RGB inside, BGR outside)."""

    def __init__(self, transforms, *, order=None):
        super().__init__(order)
        self.transforms = transforms

    @staticmethod
    def _swap_rb(image):
        if image.shape[0] == 3:
            return np.ascontiguousarray(image[[2, 1, 0]])
        if image.shape[2] == 3:
            return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return image

    def _apply_image(self, image):
        from PIL import Image  # optional dependency, needed only by this transform

        picture = Image.fromarray(self._swap_rb(image).astype(np.uint8))
        for t in self.transforms:
            picture = t(picture)
        if isinstance(picture, Image.Image):
            picture = np.array(picture, dtype=np.uint8)
        return self._swap_rb(picture)
