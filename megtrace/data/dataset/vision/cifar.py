"""CIFAR-10/100 from the local ``cifar-*-python`` batch folder (images (32, 32, 3) BGR uint8)."""
from __future__ import annotations

import os
import tarfile
from typing import Tuple

import numpy as np

from ....logger import get_logger
from ._local_root import resolve_root
from .meta_vision import VisionDataset
from .utils import load_batch_pickle, no_download

logger = get_logger(__name__)


class CIFAR10(VisionDataset):
    """``CIFAR10(root, train, download, timeout)``; reads ``root/cifar-10-batches-py`` (or unpacks the
    ``.tar.gz`` already in ``root``); megtrace downloads nothing. Batches are unpickled without running code."""

    url_path = "http://www.cs.utoronto.ca/~kriz/"
    raw_file_name = "cifar-10-python.tar.gz"
    raw_file_md5 = "c58f30108f718f92721af3b95e74349a"
    raw_file_dir = "cifar-10-batches-py"
    train_batch = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"]
    test_batch = ["test_batch"]
    meta_info = {"name": "batches.meta"}
    label_keys = (b"labels",)

    def __init__(self, root: str = None, train: bool = True, download: bool = True, timeout: int = 500):
        super().__init__(root, order=("image", "image_category"))
        self.timeout = timeout
        self.root = resolve_root(self, root, download)
        self.target_file = os.path.join(self.root, self.raw_file_dir)
        if not os.path.exists(self.target_file):
            if not download:
                raise ValueError("dir does not contain target file %s, please set download=True" % self.target_file)
            self.download()
        self.arrays = self.bytes2array(self.train_batch if train else self.test_batch)

    def __getitem__(self, index: int) -> Tuple:
        return tuple(array[index] for array in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])

    @property
    def meta(self):
        return load_batch_pickle(os.path.join(self.root, self.raw_file_dir, self.meta_info["name"]))

    def download(self):
        """Unpack the archive if it is already in ``root``; fetching it is not supported."""
        archive = os.path.join(self.root, self.raw_file_name)
        if not os.path.exists(archive):
            raise no_download(type(self).__name__, self.root, [self.raw_file_name, self.raw_file_dir + "/"])
        self.process()

    def untar(self, file_path: str, dirs: str) -> None:
        assert file_path.endswith(".tar.gz")
        logger.debug("untar file %s to %s", file_path, dirs)
        with tarfile.open(file_path) as archive:
            archive.extractall(path=dirs, filter="data")  # no links or paths out of ``dirs``

    def process(self):
        logger.info("process raw data ...")
        self.untar(os.path.join(self.root, self.raw_file_name), self.root)

    def bytes2array(self, filenames):
        images, labels = [], [[] for _ in self.label_keys]
        for name in filenames:
            batch = load_batch_pickle(os.path.join(self.root, self.raw_file_dir, name))
            chw = np.asarray(batch[b"data"]).reshape(-1, 3, 32, 32)
            images.extend(list(chw.transpose(0, 2, 3, 1)[..., ::-1]))  # RGB planes -> HWC BGR
            for out, key in zip(labels, self.label_keys):
                out.extend(batch[key])
        return (images, *(np.array(values, dtype=np.int32) for values in labels))


class CIFAR100(CIFAR10):
    """Samples are (image, fine label, coarse label)."""

    raw_file_name = "cifar-100-python.tar.gz"
    raw_file_md5 = "eb9058c3a382ffc7106e4002c42a8d85"
    raw_file_dir = "cifar-100-python"
    train_batch = ["train"]
    test_batch = ["test"]
    meta_info = {"name": "meta"}
    label_keys = (b"fine_labels", b"coarse_labels")
