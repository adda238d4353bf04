"""COCO: MS COCO detection / keypoint annotations (http://cocodataset.org), read from local files."""
from __future__ import annotations

from typing import List

import numpy as np

from ._json_detection import JsonDetectionDataset

MIN_VISIBLE_KEYPOINTS = 10  # an image kept for keypoint training shows at least this many keypoints

# The file's category id of each name in ``COCO.class_names`` (COCO leaves gaps in its 1..90 ids).
_ORIGINAL_IDS = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32,
    33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
    60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
)

# Image fields of the annotation file that no sample uses; dropped to save memory on the 118k-image file.
_UNUSED_IMAGE_FIELDS = ("license", "coco_url", "date_captured", "flickr_url")


class COCO(JsonDetectionDataset):
    """MS COCO; besides the fields of JsonDetectionDataset, ``keypoints`` gives float32 (N, 17, 3)
    (x, y, visibility per name in ``keypoint_names``).

    With ``remove_images_without_annotations`` an image stays when it has a non-crowd box of positive size,
    and, when ``keypoints`` is asked for, keypoints with at least 10 of them visible.
    """

    supported_order = ("image", "boxes", "boxes_category", "keypoints", "info")

    def _kept_image_fields(self, img: dict) -> dict:
        for name in _UNUSED_IMAGE_FIELDS:
            img.pop(name, None)
        return img

    def _kept_annotation_fields(self, ann: dict) -> dict:
        ann.pop("segmentation", None)  # no order field reads polygons
        return ann

    def _is_usable(self, anno: List[dict]) -> bool:
        if not anno:
            return False
        if ("boxes" in self.order or "boxes_category" in self.order) and "bbox" not in anno[0]:
            return False
        if "keypoints" in self.order:
            if "keypoints" not in anno[0]:
                return False
            visible = sum(sum(1 for v in obj["keypoints"][2::3] if v > 0) for obj in anno)
            if visible < MIN_VISIBLE_KEYPOINTS:
                return False
        return True

    def _field(self, key: str, img_id: int, anno: List[dict]):
        if key == "keypoints":
            return np.array([obj["keypoints"] for obj in anno], dtype=np.float32).reshape(
                -1, len(self.keypoint_names), 3)
        return super()._field(key, img_id, anno)

    class_names = (
        "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
        "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
        "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
        "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
        "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
        "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
        "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard",
        "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
        "scissors", "teddy bear", "hair drier", "toothbrush",
    )

    classes_originID = dict(zip(class_names, _ORIGINAL_IDS))

    keypoint_names = (
        "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
        "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
        "right_knee", "left_ankle", "right_ankle",
    )
