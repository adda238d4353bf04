"""PascalVOC: Pascal VOC detection (Annotations/*.xml) or segmentation (SegmentationClass*/*.png) samples."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np

from ._json_detection import read_image
from .meta_vision import VisionDataset

_BOX_TAGS = ("xmin", "ymin", "xmax", "ymax")


def _voc_colormap(count: int) -> List[List[int]]:
    """VOC's palette in BGR: label i spreads its bits 0, 1, 2, 3, 4, 5, ... over red, green, blue, red, ...
    from the high bit of each channel down."""
    colors = []
    for label in range(count):
        rgb = [0, 0, 0]
        for shift in range(8):
            for channel in range(3):
                rgb[channel] |= ((label >> (3 * shift + channel)) & 1) << (7 - shift)
        colors.append([rgb[2], rgb[1], rgb[0]])
    return colors


def _read_split(path: str) -> List[str]:
    with open(path, "r") as f:
        return [line.strip() for line in f.readlines()]


class PascalVOC(VisionDataset):
    """Pascal VOC (http://host.robots.ox.ac.uk/pascal/VOC/) under ``root`` (a VOC20xx folder).

    ``image_set`` names a split file: ImageSets/Main/<image_set>.txt when ``order`` asks for boxes,
    ImageSets/Segmentation/<image_set>.txt when it asks for ``mask`` (not both). Fields:

    - ``image``: BGR uint8 (H, W, 3) from JPEGImages/<name>.jpg
    - ``boxes``: float32 (N, 4), xmin, ymin, xmax, ymax as the XML writes them (difficult ones included)
    - ``boxes_category``: int32 (N,), index in ``class_names`` plus 1
    - ``mask``: uint8 (H, W, 1) class index, 255 where the colour is no class's; a split whose name holds
      "aug" reads SegmentationClass_aug/<name>.png, already class indices
    - ``info``: [height, width, name]
    """

    supported_order = ("image", "boxes", "boxes_category", "mask", "info")

    def __init__(self, root: str, image_set: str, *, order: Optional[Sequence[str]] = None):
        order = ("image",) if order is None else order
        wants_boxes = "boxes" in order or "boxes_category" in order
        if wants_boxes and "mask" in order:
            raise ValueError("PascalVOC only supports boxes & boxes_category or mask, not both.")
        super().__init__(root, order=order, supported_order=self.supported_order)
        if not os.path.isdir(self.root):
            raise RuntimeError("Dataset not found or corrupted.")
        if not wants_boxes and "mask" not in order:
            raise NotImplementedError(
                "PascalVOC reads a detection or a segmentation split: order {} names none of "
                "boxes, boxes_category, mask".format(tuple(order)))
        self.image_set = image_set
        split = image_set.rstrip("\n") + ".txt"
        if wants_boxes:
            self.file_names = _read_split(os.path.join(self.root, "ImageSets", "Main", split))
            self.annotations = [os.path.join(self.root, "Annotations", name + ".xml") for name in self.file_names]
        else:
            self.file_names = _read_split(os.path.join(self.root, "ImageSets", "Segmentation", split))
            mask_dir = "SegmentationClass_aug" if "aug" in image_set else "SegmentationClass"
            self.masks = [os.path.join(self.root, mask_dir, name + ".png") for name in self.file_names]
        self.images = [os.path.join(self.root, "JPEGImages", name + ".jpg") for name in self.file_names]
        self.img_infos: Dict[int, dict] = {}

    def __getitem__(self, index: int) -> tuple:
        image = objects = None
        target = []
        for key in self.order:
            if key == "image":
                image = read_image(self.images[index])
                target.append(image)
            elif key in ("boxes", "boxes_category"):
                objects = objects if objects is not None else self._objects(index)
                if key == "boxes":
                    target.append(np.array([box for _, box in objects], dtype=np.float32).reshape(-1, 4))
                else:
                    target.append(np.array([self.class_names.index(name) + 1 for name, _ in objects],
                                           dtype=np.int32))
            elif key == "mask":
                target.append(self._mask(index))
            elif key == "info":
                info = self.get_img_info(index, image)
                target.append([info["height"], info["width"], info["file_name"]])
            else:
                raise NotImplementedError("{} is unsupported data type".format(key))
        return tuple(target)

    def _objects(self, index: int) -> List[Tuple[str, Tuple[float, ...]]]:
        """(class name, (xmin, ymin, xmax, ymax)) of each <object> of the image's annotation."""
        path = self.annotations[index]
        objects = []
        for obj in ET.parse(path).getroot().findall("object"):
            box = obj.find("bndbox")
            if obj.find("name") is None or box is None or any(box.find(t) is None for t in _BOX_TAGS):
                raise ValueError("{}: an <object> lacks <name> or <bndbox> with {}".format(path, ", ".join(_BOX_TAGS)))
            objects.append((obj.find("name").text.strip(), tuple(float(box.find(t).text) for t in _BOX_TAGS)))
        return objects

    def _mask(self, index: int) -> np.ndarray:
        path = self.masks[index]
        if "aug" in self.image_set:
            mask = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        else:
            mask = cv2.imread(path, cv2.IMREAD_COLOR)
        if mask is None:
            raise FileNotFoundError("cannot read mask {}".format(path))
        if mask.ndim == 3:
            mask = self._colors_to_labels(mask)
        return mask[:, :, np.newaxis]

    def _colors_to_labels(self, mask: np.ndarray) -> np.ndarray:
        labels = np.full(mask.shape[:2], 255, dtype=np.uint8)
        for label, color in enumerate(self.class_colors):
            labels[np.all(mask == np.array(color, dtype=mask.dtype), axis=-1)] = label
        return labels

    def __len__(self) -> int:
        return len(self.images)

    def get_img_info(self, index: int, image: Optional[np.ndarray] = None) -> dict:
        """{height, width, file_name} of the image (read once, then cached)."""
        if index not in self.img_infos:
            if image is None:
                image = read_image(self.images[index])
            self.img_infos[index] = dict(height=image.shape[0], width=image.shape[1],
                                         file_name=self.file_names[index])
        return self.img_infos[index]

    class_names = (
        "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow", "diningtable",
        "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor",
    )

    class_colors = _voc_colormap(len(class_names) + 1)  # background first
