"""`KeyStream`: where random ops get their keys: (seed, counter) pairs, the counter
advancing on every draw, eagerly and on every run of a compiled trace."""
from __future__ import annotations

import numpy as np


class KeyStream:
    def __init__(self, seed: int):
        self.reset(seed)

    def reset(self, seed: int) -> None:
        if not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int; got {type(seed).__name__}")
        self.seed = int(seed) & 0xFFFFFFFF
        self.counter = 0

    def next_key(self) -> np.ndarray:
        """int32[2]: the seed and this draw's number (both as uint32 bit patterns)."""
        key = np.array([self.seed, self.counter], np.uint32).view(np.int32)
        self.counter = (self.counter + 1) & 0xFFFFFFFF
        return key
