"""ImageFolder: ``root/<class>/**/<image>`` with class ids in sorted class-name order."""
from __future__ import annotations

import os
from typing import Dict, List, Tuple

import cv2
import numpy as np

from .meta_vision import VisionDataset
from .utils import is_img


class ImageFolder(VisionDataset):
    """Samples are (BGR uint8 image from cv2.imread, np.int32 class id or the class name)."""

    def __init__(self, root: str, check_valid_func=None, class_name: bool = False):
        super().__init__(root, order=("image", "image_category"))
        self.root = root
        self.check_valid = check_valid_func if check_valid_func is not None else is_img
        self.class_name = class_name
        self.class_dict = self.collect_class()
        self.samples = self.collect_samples()

    def collect_class(self) -> Dict:
        names = sorted(entry.name for entry in os.scandir(self.root) if entry.is_dir())
        return {name: np.int32(i) for i, name in enumerate(names)}

    def collect_samples(self) -> List:
        samples = []
        top = os.path.expanduser(self.root)
        for key in sorted(self.class_dict):
            folder = os.path.join(top, key)
            if not os.path.isdir(folder):
                continue
            for dirpath, _, filenames in sorted(os.walk(folder, followlinks=True)):
                for name in sorted(filenames):
                    path = os.path.join(dirpath, name)
                    if self.check_valid(path):
                        samples.append((path, key if self.class_name else self.class_dict[key]))
        return samples

    def __getitem__(self, index: int) -> Tuple:
        path, label = self.samples[index]
        return cv2.imread(path, cv2.IMREAD_COLOR), label

    def __len__(self) -> int:
        return len(self.samples)
