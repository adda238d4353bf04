"""Transform bases (MegEngine 1.13's megengine.data.transform.meta_transform)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence, Tuple


class Transform(ABC):
    """A per-sample transform; ``apply_batch`` maps ``apply`` over a batch of samples."""

    def apply_batch(self, inputs: Sequence[Tuple]):
        return tuple(self.apply(sample) for sample in inputs)

    @abstractmethod
    def apply(self, input: Tuple):
        pass

    def __repr__(self):
        return self.__class__.__name__


class PseudoTransform(Transform):
    """The identity (DataLoader's default)."""

    def apply(self, input: Tuple):
        return input
