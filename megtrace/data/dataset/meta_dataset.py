"""Dataset bases (MegEngine 1.13's megengine.data.dataset): map-style, stream-style, arrays, concatenation."""
from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from typing import Tuple


class Dataset(ABC):
    """Map-style dataset: ``__getitem__(index)`` and ``__len__``; samples are NumPy data, not Tensors."""

    @abstractmethod
    def __init__(self):
        pass

    @abstractmethod
    def __getitem__(self, index):
        pass

    @abstractmethod
    def __len__(self):
        pass


class StreamDataset(Dataset):
    """Stream-style dataset: only ``__iter__``; indexing and length are refused."""

    @abstractmethod
    def __init__(self):
        pass

    @abstractmethod
    def __iter__(self):
        pass

    def __getitem__(self, idx):
        raise AssertionError("can not get item from StreamDataset by index")

    def __len__(self):
        raise AssertionError("StreamDataset does not have length")


class ArrayDataset(Dataset):
    """Samples are ``tuple(array[i] for array in arrays)``; all arrays must have the same length."""

    def __init__(self, *arrays):
        super().__init__()
        if not all(len(arrays[0]) == len(array) for array in arrays):
            raise ValueError("lengths of input arrays are inconsistent")
        self.arrays = arrays

    def __getitem__(self, index: int) -> Tuple:
        return tuple(array[index] for array in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])


class ConcatDataset(Dataset):
    """Map-style datasets one after another."""

    def __init__(self, datasets):
        super().__init__()
        self.datasets = list(datasets)
        assert len(self.datasets) > 0, "datasets should not be an empty iterable"
        for part in self.datasets:
            assert not isinstance(part, StreamDataset), "ConcatDataset does not support StreamDataset"
        self.cumulative_sizes = []
        total = 0
        for part in self.datasets:
            total += len(part)
            self.cumulative_sizes.append(total)

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        offset = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - offset]

    def __len__(self):
        return self.cumulative_sizes[-1]
