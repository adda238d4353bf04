"""megengine.data.dataset: dataset bases (vision datasets reading local files come in .vision)."""
from .meta_dataset import ArrayDataset, ConcatDataset, Dataset, StreamDataset

__all__ = ["ArrayDataset", "ConcatDataset", "Dataset", "StreamDataset"]
