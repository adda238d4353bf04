"""Where random ops get their keys: int32[2] = (seed word, counter).

MegEngine 1.13 keeps one generator per kind of random op (uniform, normal, ...) for each
seed: eager draws of one kind advance only that kind's stream. In a compiled graph (a
trace, a loaded .mge) each random operator has a generator of its own, started afresh
from its seed, that advances on every run. `op_key` is the key of draw `n` of a `kind`
for `seed`; the kind is folded into the seed word so that kinds draw different bits.
Both generators take each draw under a lock: threads calling one loaded model (or one
RNG) at once each get a draw of their own, never the same counter twice."""
from __future__ import annotations

import threading

import numpy as np

KINDS = ("uniform", "normal", "gamma", "beta", "poisson", "permutation", "shuffle", "dropout")


def _seed(seed: int) -> int:
    if not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int; got {type(seed).__name__}")
    return int(seed) & 0xFFFFFFFF


def op_key(seed: int, kind: str, n: int) -> np.ndarray:
    """The key of draw `n` (from 0) of a generator of `kind` seeded with `seed`."""
    word = (_seed(seed) ^ (KINDS.index(kind) * 0x9E3779B9)) & 0xFFFFFFFF
    return np.array([word, n & 0xFFFFFFFF], np.uint32).view(np.int32)


class KeyStream:
    """One seed's generators: a counter per kind of op, advanced on every draw."""

    def __init__(self, seed: int):
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self._lock = threading.Lock()
        self.seed = _seed(seed)
        self._counters: dict[str, int] = {}

    def next_key(self, kind: str) -> np.ndarray:
        with self._lock:
            n = self._counters.get(kind, 0)
            self._counters[kind] = n + 1
        return op_key(self.seed, kind, n)


class OprKeys:
    """The generator of one random operator of a compiled graph: fresh from the op's
    seed when the graph is built, one draw per run."""

    def __init__(self, seed: int, kind: str):
        self.seed, self.kind, self.runs = _seed(seed), kind, 0
        self._lock = threading.Lock()

    def first(self) -> np.ndarray:
        """The key of the call that traces the op (MegEngine's tracing run draws it from
        a fresh generator too, and the compiled graph then starts afresh)."""
        return op_key(self.seed, self.kind, 0)

    def next_key(self) -> np.ndarray:
        with self._lock:
            n, self.runs = self.runs, self.runs + 1
        return op_key(self.seed, self.kind, n)
