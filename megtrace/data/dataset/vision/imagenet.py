"""ImageNet (ILSVRC2012) from already-extracted ``root/train/<wnid>/`` and ``root/val/<wnid>/`` folders."""
from __future__ import annotations

import os

from ....logger import get_logger
from ....serialization import load
from .folder import ImageFolder
from .utils import _default_dataset_root

logger = get_logger(__name__)


class ImageNet(ImageFolder):
    """An ImageFolder over ``root/train`` or ``root/val``. megtrace does not unpack the raw ILSVRC tars
    (MegEngine does when the folders are missing): extract them into ``train/<wnid>/`` and ``val/<wnid>/``."""

    raw_file_meta = {
        "train": ("ILSVRC2012_img_train.tar", "1d675b47d978889d74fa0da5fadfb00e"),
        "val": ("ILSVRC2012_img_val.tar", "29b22e2961454d5413ddabcf34fc5622"),
        "devkit": ("ILSVRC2012_devkit_t12.tar.gz", "fa75699e90414af021442c21a62c3abf"),
    }
    default_train_dir = "train"
    default_val_dir = "val"
    default_devkit_dir = "ILSVRC2012_devkit_t12"

    def __init__(self, root: str = None, train: bool = True, **kwargs):
        self.root = root if root is not None else os.path.join(_default_dataset_root(), type(self).__name__)
        if not os.path.exists(self.root):
            raise FileNotFoundError("dir %s does not exist" % self.root)
        self.devkit_dir = os.path.join(self.root, self.default_devkit_dir)
        if not os.path.exists(self.devkit_dir):
            logger.warning("devkit directory %s does not exists", self.devkit_dir)
        self.train = train
        self.target_folder = os.path.join(self.root, self.default_train_dir if train else self.default_val_dir)
        if not os.path.exists(self.target_folder):
            if not self.check_raw_file():
                raise FileNotFoundError("expected image folder %s does not exist, and raw files do not exist in %s"
                                        % (self.target_folder, self.root))
            raise NotImplementedError("expected image folder %s does not exist; megtrace does not extract the raw "
                                      "ImageNet tars, extract them into %s/<wnid>/" % (self.target_folder,
                                                                                      self.target_folder))
        super().__init__(self.target_folder, **kwargs)

    def check_raw_file(self) -> bool:
        return all(os.path.exists(os.path.join(self.root, name)) for name, _ in self.raw_file_meta.values())

    @property
    def valid_ground_truth(self):
        path = os.path.join(self.devkit_dir, "data", "ILSVRC2012_validation_ground_truth.txt")
        if not os.path.exists(path):
            raise FileNotFoundError("valid ground truth file %s does not exist" % path)
        with open(path) as f:
            return [int(line) for line in f]

    @property
    def meta(self):
        """(idx_to_wnid, wnid_to_classes) from the devkit's cached meta.pkl (meta.mat is not parsed)."""
        return load(os.path.join(self.devkit_dir, "meta.pkl"))
