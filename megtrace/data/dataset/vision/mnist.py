"""MNIST from its four local idx .gz files (images (28, 28, 1) uint8, labels int32)."""
from __future__ import annotations

import gzip
import os
from typing import Tuple

import numpy as np

from ....logger import get_logger
from ._local_root import resolve_root
from .meta_vision import VisionDataset
from .utils import no_download

logger = get_logger(__name__)


class MNIST(VisionDataset):
    """``MNIST(root, train, download)``; megtrace reads only files already in ``root``."""

    url_path = "https://ossci-datasets.s3.amazonaws.com/mnist/"
    raw_file_name = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                     "t10k-labels-idx1-ubyte.gz"]
    raw_file_md5 = ["f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                    "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"]

    def __init__(self, root: str = None, train: bool = True, download: bool = True):
        super().__init__(root, order=("image", "image_category"))
        self.root = resolve_root(self, root, download)
        if not self._check_raw_files():
            if download:
                raise no_download("MNIST", self.root, self.raw_file_name)
            raise ValueError("root does not contain valid raw files, please set download=True")
        self.process(train)

    def __getitem__(self, index: int) -> Tuple:
        return tuple(array[index] for array in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])

    @property
    def meta(self):
        return self._meta_data

    def _check_raw_files(self) -> bool:
        return all(os.path.exists(os.path.join(self.root, name)) for name in self.raw_file_name)

    def download(self):
        raise no_download("MNIST", self.root, self.raw_file_name)

    def process(self, train: bool) -> None:
        logger.info("process the raw files of %s set...", "train" if train else "test")
        images_file, labels_file = self.raw_file_name[0:2] if train else self.raw_file_name[2:4]
        image_meta, images = parse_idx3(os.path.join(self.root, images_file))
        label_meta, labels = parse_idx1(os.path.join(self.root, labels_file))
        self._meta_data = {"images": image_meta, "labels": label_meta}
        self.arrays = (images, labels.astype(np.int32))


def _read_gz(path: str) -> bytes:
    assert path.endswith(".gz")
    with gzip.open(path, "rb") as f:
        return f.read()


def parse_idx3(idx3_file: str):
    """Big-endian header (magic, count, height, width), then count*height*width uint8 pixels."""
    data = _read_gz(idx3_file)
    magic, count, height, width = (int(v) for v in np.frombuffer(data, ">i4", 4))
    meta = {"magic": magic, "imgs": count, "height": height, "width": width}
    pixels = np.frombuffer(data, np.uint8, offset=16)
    usable = len(pixels) // (height * width)
    images = list(pixels[:usable * height * width].reshape(usable, height, width, 1).copy())
    return meta, images


def parse_idx1(idx1_file: str):
    """Big-endian header (magic, count), then count uint8 labels."""
    data = _read_gz(idx1_file)
    magic, count = (int(v) for v in np.frombuffer(data, ">i4", 2))
    labels = np.frombuffer(data, np.uint8, offset=8)[:count].astype(int)
    return {"magic": magic, "imgs": count}, labels
