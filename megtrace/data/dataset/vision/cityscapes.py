"""Cityscapes: semantic segmentation of street scenes (leftImg8bit images, <mode> label-id masks)."""
from __future__ import annotations

import os
from typing import Optional, Sequence

import cv2
import numpy as np

from ._json_detection import read_image
from .meta_vision import VisionDataset

# Cityscapes' label id of each training class, in ``Cityscapes.class_names`` order; other ids are ignored (255).
_TRAIN_LABEL_IDS = (7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33)


class Cityscapes(VisionDataset):
    """Cityscapes (http://www.cityscapes-dataset.com) under ``root``: images
    leftImg8bit/<image_set>/<city>/<stem>_leftImg8bit.png with masks
    <mode>/<image_set>/<city>/<stem>_<mode>_labelIds.png
    (``mode`` is "gtFine" or "gtCoarse"). Fields:

    - ``image``: BGR uint8 (H, W, 3)
    - ``mask``: uint8 (H, W, 1) training class index, 255 for ignored label ids
    - ``info``: [height, width, image path]

    Samples go city by city, file by file, in sorted name order.
    """

    supported_order = ("image", "mask", "info")

    def __init__(self, root: str, image_set: str, mode: str, *, order: Optional[Sequence[str]] = None):
        super().__init__(root, order=order, supported_order=self.supported_order)
        if not os.path.isdir(self.root):
            raise RuntimeError("Dataset not found or corrupted.")
        self.mode = mode
        self.images_dir = os.path.join(self.root, "leftImg8bit", image_set)
        self.masks_dir = os.path.join(self.root, mode, image_set)
        self.images, self.masks = [], []
        for city in sorted(os.listdir(self.images_dir)):
            for file_name in sorted(os.listdir(os.path.join(self.images_dir, city))):
                stem = file_name.split("_leftImg8bit")[0]
                self.images.append(os.path.join(self.images_dir, city, file_name))
                self.masks.append(os.path.join(self.masks_dir, city, "{}_{}_labelIds.png".format(stem, mode)))

    def __getitem__(self, index: int) -> tuple:
        image = None
        target = []
        for key in self.order:
            if key == "image":
                image = read_image(self.images[index])
                target.append(image)
            elif key == "mask":
                target.append(self._mask(index))
            elif key == "info":
                image = image if image is not None else read_image(self.images[index])
                target.append([image.shape[0], image.shape[1], self.images[index]])
            else:
                raise NotImplementedError("{} is unsupported data type".format(key))
        return tuple(target)

    def _mask(self, index: int) -> np.ndarray:
        label_ids = cv2.imread(self.masks[index], cv2.IMREAD_GRAYSCALE)
        if label_ids is None:
            raise FileNotFoundError("cannot read mask {}".format(self.masks[index]))
        labels = np.full(label_ids.shape, 255, dtype=np.uint8)
        for train_id, label_id in enumerate(_TRAIN_LABEL_IDS):
            labels[label_ids == label_id] = train_id
        return labels[:, :, np.newaxis]

    def __len__(self) -> int:
        return len(self.images)

    class_names = (
        "road", "sidewalk", "building", "wall", "fence", "pole", "traffic light", "traffic sign", "vegetation",
        "terrain", "sky", "person", "rider", "car", "truck", "bus", "train", "motorcycle", "bicycle",
    )
