"""Merging a list of samples into a batch of NumPy arrays (MegEngine 1.13's megengine.data.Collator)."""
from __future__ import annotations

import collections.abc

import numpy as np

_ERR = ("default_collator: inputs must contain numpy arrays, numbers, Unicode strings, bytes, dicts or lists; "
        "found {}")


class Collator:
    """Stacks samples field by field: arrays -> stacked array, numbers -> 1-D array, str/bytes -> list,
    dicts/namedtuples/sequences -> the same structure of collated fields."""

    def apply(self, inputs):
        first = inputs[0]
        kind = type(first)
        if isinstance(first, np.ndarray):
            if first.dtype.kind == "O":     # (MegEngine stacks string arrays)
                raise TypeError(_ERR.format(first.dtype))
            return np.ascontiguousarray(np.stack(inputs))
        if isinstance(first, np.generic) and not isinstance(first, (np.str_, np.bytes_)):
            return np.array(inputs)
        if isinstance(first, float):
            return np.array(inputs, dtype=np.float64)
        if isinstance(first, int):
            return np.array(inputs)
        if isinstance(first, (str, bytes)):
            return inputs
        if isinstance(first, collections.abc.Mapping):
            return {key: self.apply([sample[key] for sample in inputs]) for key in first}
        # each field as zip gives it, a tuple: a batch's strings stay one (MegEngine's)
        if isinstance(first, tuple) and hasattr(first, "_fields"):
            return kind(*(self.apply(field) for field in zip(*inputs)))
        if isinstance(first, collections.abc.Sequence):
            return [self.apply(field) for field in zip(*inputs)]
        raise TypeError(_ERR.format(kind))
