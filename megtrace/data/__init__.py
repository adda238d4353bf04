"""megengine.data: samplers, datasets, transforms, Collator and DataLoader (MegEngine 1.13 names)."""
from . import dataset, transform
from .collator import Collator
from .dataloader import DataLoader
from .sampler import (Infinite, MapSampler, RandomSampler, ReplacementSampler, Sampler, SequentialSampler,
                      StreamSampler)

__all__ = ["Collator", "DataLoader", "Infinite", "MapSampler", "RandomSampler", "ReplacementSampler", "Sampler",
           "SequentialSampler", "StreamSampler", "dataset", "transform"]
