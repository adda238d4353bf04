"""megengine.data.dataset: dataset bases and the vision datasets that read local files."""
from .meta_dataset import ArrayDataset, ConcatDataset, Dataset, StreamDataset
from .vision import *  # noqa: F401,F403 - MegEngine exports the vision datasets here
from .vision import __all__ as _vision_all
# MegEngine's star import also leaves the vision submodules here (D.mnist, D.coco, ...)
from .vision import (cifar, cityscapes, coco, folder, imagenet, meta_vision,  # noqa: F401
                     mnist, objects365, utils, voc)

__all__ = ["ArrayDataset", "ConcatDataset", "Dataset", "StreamDataset", *_vision_all]
