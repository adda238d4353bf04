"""Root-folder handling shared by MNIST and CIFAR (MegEngine's rules, minus the download)."""
from __future__ import annotations

import os

from ....logger import get_logger
from .utils import _default_dataset_root

logger = get_logger(__name__)


def resolve_root(dataset, root, download: bool) -> str:
    """The folder to read: ``root`` or ~/.cache/megengine/<ClassName>; a missing ``root`` is created when
    ``download`` (as MegEngine does) and refused otherwise with MegEngine's message."""
    if root is None:
        root = os.path.join(_default_dataset_root(), type(dataset).__name__)
        os.makedirs(root, exist_ok=True)
        return root
    if not os.path.exists(root):
        if not download:
            raise ValueError("dir %s does not exist" % root)
        logger.debug("dir %s does not exist, will be automatically created", root)
        os.makedirs(root)
    return root
