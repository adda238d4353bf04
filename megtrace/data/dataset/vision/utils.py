"""Shared helpers of the vision datasets: default root, image test, md5, safe unpickling, no downloads."""
from __future__ import annotations

import hashlib
import os
import pickle
from typing import Any, BinaryIO

from ....safe_pickle import SafeUnpickler

IMG_EXT = (".jpg", ".png", ".jpeg", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def _default_dataset_root() -> str:
    """``$XDG_CACHE_HOME/megengine`` (default ~/.cache/megengine), where MegEngine keeps its datasets."""
    return os.path.expanduser(os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "megengine"))


def is_img(filename: str) -> bool:
    return filename.lower().endswith(IMG_EXT)


def calculate_md5(filename: str) -> str:
    digest = hashlib.md5()
    with open(filename, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def no_download(name: str, root: str, files) -> RuntimeError:
    """megtrace downloads nothing: the error says which files to put where instead."""
    return RuntimeError("{}: downloading is not supported by megtrace; put {} under {} (or pass download=False "
                        "to get MegEngine's error)".format(name, ", ".join(files), root))


class _Py2Unpickler(SafeUnpickler):
    """The allow-listed unpickler with ``encoding="bytes"`` (CIFAR's batches are Python 2 pickles)."""

    def __init__(self, file: BinaryIO, what: str):
        pickle.Unpickler.__init__(self, file, encoding="bytes")
        self._extra, self._allow_class, self._what = {}, None, what


def load_batch_pickle(path: str) -> Any:
    """Read a dataset pickle with no code execution (only containers, numbers, strings, NumPy arrays)."""
    with open(path, "rb") as f:
        return _Py2Unpickler(f, what=path).load()
