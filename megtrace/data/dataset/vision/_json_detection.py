"""JsonDetectionDataset: the COCO-format annotation file shared by COCO and Objects365.

One JSON file lists ``images``, ``annotations`` (``bbox`` as x, y, w, h) and ``categories``; samples are the
images in ascending id order, and category ids are renumbered 1..N in ascending id order (0 is background).
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Dict, List, Optional, Sequence

import cv2
import numpy as np

from .meta_vision import VisionDataset


def read_image(path: str) -> np.ndarray:
    """BGR uint8 image as cv2 reads it; a missing or unreadable file is an error, not a ``None`` sample."""
    image = cv2.imread(path, cv2.IMREAD_COLOR)
    if image is None:
        raise FileNotFoundError("cannot read image {}".format(path))
    return image


class JsonDetectionDataset(VisionDataset):
    """Samples are tuples with one entry per name in ``order``:

    - ``image``: BGR uint8 (H, W, 3)
    - ``boxes``: float32 (N, 4), x0, y0, x1, y1 (the file's x, y, w, h with w, h added)
    - ``boxes_category``: int32 (N,), contiguous category ids from 1
    - ``info``: [height, width, file_name] as the file lists them
    """

    supported_order = ("image", "boxes", "boxes_category", "info")

    def __init__(self, root: str, ann_file: str, remove_images_without_annotations: bool = False, *,
                 order: Optional[Sequence[str]] = None):
        super().__init__(root, order=order, supported_order=self.supported_order)
        with open(ann_file, "r") as f:
            dataset = json.load(f)
        self.imgs: Dict[int, dict] = {img["id"]: self._kept_image_fields(img) for img in dataset["images"]}
        self.img_to_anns: Dict[int, List[dict]] = defaultdict(list)
        for ann in dataset["annotations"]:
            self.img_to_anns[ann["image_id"]].append(self._kept_annotation_fields(ann))
        self.cats: Dict[int, dict] = {cat["id"]: cat for cat in dataset["categories"]}
        self.ids: List[int] = sorted(self.imgs)
        if remove_images_without_annotations:
            self._keep_annotated_images()
        self.json_category_id_to_contiguous_id = {cat_id: i + 1 for i, cat_id in enumerate(sorted(self.cats))}
        self.contiguous_category_id_to_json_id = {
            v: k for k, v in self.json_category_id_to_contiguous_id.items()}

    def _kept_image_fields(self, img: dict) -> dict:
        return img

    def _kept_annotation_fields(self, ann: dict) -> dict:
        return ann

    def _is_usable(self, anno: List[dict]) -> bool:
        """Whether an image with these (non-crowd, non-empty) boxes stays in the dataset."""
        return len(anno) > 0

    def _keep_annotated_images(self) -> None:
        """Drop crowd boxes and boxes of zero width or height, then the images left without a usable one."""
        kept = []
        for img_id in self.ids:
            anno = [obj for obj in self.img_to_anns.get(img_id, []) if obj.get("iscrowd", 0) == 0]
            anno = [obj for obj in anno if obj["bbox"][2] > 0 and obj["bbox"][3] > 0]
            if self._is_usable(anno):
                kept.append(img_id)
                self.img_to_anns[img_id] = anno
            else:
                del self.imgs[img_id]
                self.img_to_anns.pop(img_id, None)
        self.ids = kept

    def __getitem__(self, index: int) -> tuple:
        img_id = self.ids[index]
        anno = self.img_to_anns[img_id]
        return tuple(self._field(key, img_id, anno) for key in self.order)

    def _field(self, key: str, img_id: int, anno: List[dict]):
        if key == "image":
            return read_image(os.path.join(self.root, self.imgs[img_id]["file_name"]))
        if key == "boxes":
            boxes = np.array([obj["bbox"] for obj in anno], dtype=np.float32).reshape(-1, 4)
            boxes[:, 2:] += boxes[:, :2]
            return boxes
        if key == "boxes_category":
            return np.array([self.json_category_id_to_contiguous_id[obj["category_id"]] for obj in anno],
                            dtype=np.int32)
        if key == "info":
            img = self.imgs[img_id]
            return [img["height"], img["width"], img["file_name"]]
        raise NotImplementedError("{} is unsupported data type".format(key))

    def __len__(self) -> int:
        return len(self.ids)

    def get_img_info(self, index: int) -> dict:
        """The image's record from the annotation file (id, file_name, height, width, ...)."""
        return self.imgs[self.ids[index]]
