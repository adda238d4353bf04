"""Index samplers for DataLoader (MegEngine 1.13's megengine.data.sampler): they yield lists of indices."""
from __future__ import annotations

import collections.abc
import itertools
import math
from abc import ABC, abstractmethod
from typing import Any, Iterator, List

import numpy as np

from .. import distributed as dist


class Sampler(ABC):
    """Base of every sampler."""

    @abstractmethod
    def __init__(self):
        pass


def _check_indices(indices) -> None:
    if indices is not None and not isinstance(indices, collections.abc.Sequence):
        raise ValueError("indices should be None or a sequence, but got indices={}".format(indices))


class MapSampler(Sampler):
    """Sampler for a map-style dataset: ``sample()`` gives all indices, ``batch()`` cuts them into batches.

    With ``world_size > 1`` the indices are padded to a multiple of the world size and each rank takes every
    ``world_size``-th one starting at ``rank``; the seed defaults to 0 then so all ranks draw the same order.
    """

    def __init__(self, dataset, batch_size: int = 1, drop_last: bool = False, num_samples: int | None = None,
                 world_size: int | None = None, rank: int | None = None, seed: int | None = None):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got batch_size={}".format(batch_size))
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got drop_last={}".format(drop_last))
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError("num_samples should be a positive integer value, but got num_samples={}"
                             .format(num_samples))
        self.batch_size = batch_size
        self.dataset = dataset
        self.drop_last = drop_last
        if world_size is None:
            world_size = dist.get_world_size() if dist.is_distributed() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_distributed() else 0
        self.world_size = world_size
        self.rank = rank
        total = len(dataset) if num_samples is None else num_samples
        self.num_samples = int(math.ceil(total / world_size))
        if self.num_samples < batch_size:
            raise ValueError("num_samples should be greater than batch_size , but got num_samples={} and "
                             "batch_size={}".format(self.num_samples, batch_size))
        if seed is None and world_size > 1:
            seed = 0
        self.rng = np.random.RandomState(seed)

    def __iter__(self) -> Iterator[List[Any]]:
        return self.batch()

    def __len__(self) -> int:
        if self.drop_last:
            return self.num_samples // self.batch_size
        return int(math.ceil(self.num_samples / self.batch_size))

    def sample(self):
        """All sample indices of one epoch (subclasses define the order)."""
        raise NotImplementedError

    def scatter(self, indices: list) -> list:
        """This rank's share of ``indices`` (padded by wrapping around to an even split)."""
        total = self.num_samples * self.world_size
        padded = list(indices)
        while len(padded) < total:
            padded += padded[: total - len(padded)]
        return padded[self.rank:total:self.world_size]

    def batch(self) -> Iterator[List[Any]]:
        """Yield lists of ``batch_size`` indices; the last shorter one unless ``drop_last``."""
        indices = list(self.sample())
        if self.world_size > 1:
            indices = self.scatter(indices)
        for start in range(0, len(indices), self.batch_size):
            chunk = indices[start:start + self.batch_size]
            if len(chunk) < self.batch_size and self.drop_last:
                return
            yield chunk


class StreamSampler(Sampler):
    """Sampler for a StreamDataset: endless batches of running counters (the data come from the stream)."""

    def __init__(self, batch_size: int = 1):
        self.batch_size = batch_size

    def __iter__(self):
        return self.batch()

    def batch(self):
        counter = self.sample()
        while True:
            yield list(itertools.islice(counter, self.batch_size))

    def sample(self):
        return itertools.count(start=0)


class SequentialSampler(MapSampler):
    """Indices in order (``indices`` if given, else 0..len(dataset)-1)."""

    def __init__(self, dataset, batch_size: int = 1, drop_last: bool = False, indices=None,
                 world_size: int | None = None, rank: int | None = None):
        super().__init__(dataset, batch_size, drop_last, None, world_size, rank)
        _check_indices(indices)
        self.indices = indices

    def sample(self):
        if self.indices is None:
            return iter(range(len(self.dataset)))
        return self.indices


class RandomSampler(MapSampler):
    """A fresh random permutation each epoch, without replacement."""

    def __init__(self, dataset, batch_size: int = 1, drop_last: bool = False, indices=None,
                 world_size: int | None = None, rank: int | None = None, seed: int | None = None):
        super().__init__(dataset, batch_size, drop_last, None, world_size, rank, seed)
        _check_indices(indices)
        self.indices = indices

    def sample(self) -> list:
        if self.indices is None:
            return self.rng.permutation(len(self.dataset)).tolist()
        return self.rng.permutation(self.indices).tolist()


class ReplacementSampler(MapSampler):
    """Random indices with replacement, optionally weighted (weights need not be normalized)."""

    def __init__(self, dataset, batch_size: int = 1, drop_last: bool = False, num_samples: int | None = None,
                 weights=None, world_size: int | None = None, rank: int | None = None, seed: int | None = None):
        super().__init__(dataset, batch_size, drop_last, num_samples, world_size, rank, seed)
        if weights is not None:
            if not isinstance(weights, collections.abc.Sequence):
                raise ValueError("weights should be None or a sequence, but got weights={}".format(weights))
            if len(weights) != len(dataset):
                raise ValueError("len(dataset)={} should be equal tolen(weights)={}"
                                 .format(len(dataset), len(weights)))
            weights = np.asarray(weights, dtype=np.float64) / sum(weights)
        self.weights = weights

    def sample(self) -> list:
        size = self.num_samples * self.world_size
        return self.rng.choice(len(self.dataset), size=size, replace=True, p=self.weights).tolist()


class Infinite(MapSampler):
    """Wraps a sampler so that iteration restarts it instead of stopping; other attributes come from it."""

    def __init__(self, sampler: MapSampler):
        self.sampler = sampler
        self.sampler_iter = iter(sampler)

    def sample(self):
        raise NotImplementedError("sample method not supported in Infinite")

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self.sampler_iter)
        except StopIteration:
            self.sampler_iter = iter(self.sampler)
            return next(self.sampler_iter)

    def __len__(self) -> int:
        return int(np.iinfo(np.int64).max)

    def __getattr__(self, name):
        if name in ("sampler", "sampler_iter"):
            raise AttributeError(name)
        return getattr(self.sampler, name)
