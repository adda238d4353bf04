"""Eager dynamic tensor rematerialization (DTR): the engine behind `megtrace.dtr`.

While DTR is enabled, every eager op's outputs of at least `evictee_minimum_size` bytes
become candidates: a `_Cell` remembers how to compute the value again (the op, its
parameters, and its inputs: their cells, or the arrays themselves for values that are
not candidates). When the candidates' memory exceeds `eviction_threshold`, the one with
the lowest MegEngine score is evicted (its array released) until it fits:

    score = (cost + cost of its evicted inputs + 1e-3) / (MB ** 1 * (now - last use + 1e-3))

(MegEngine's eval_func with its eager factors of 1; time is the accumulated measured
compute time). An evicted Tensor changes class to `EvictedTensor`, whose `_value`
property recomputes the value (its evicted inputs first) on the next read and turns it
back into a plain Tensor, so nothing else in megtrace needs to know. Tensors that share
a value (a gradient tape's saved copies) are bound to the same cell and evicted and
restored together. A value no Tensor refers to any more is released at once, and
recomputed only if an evicted value needs it.
"""
from __future__ import annotations

import math
import random
import time
import weakref

from ..tensor import Tensor

_SLOT = Tensor.__dict__["_value"]      # the real storage of Tensor._value


class EvictedTensor(Tensor):
    """A Tensor whose value DTR released; reading `_value` recomputes it."""

    __slots__ = ()

    @property
    def _value(self):
        return POOL.materialize_tensor(self)

    @_value.setter
    def _value(self, value):
        self.__class__ = Tensor            # given a new value: a plain tensor again
        _SLOT.__set__(self, value)


class _Cell:
    __slots__ = ("op", "kwargs", "inputs", "index", "value", "nbytes", "cost",
                 "last_used", "tensors", "__weakref__")

    def __init__(self, op, kwargs, inputs, index, value, cost, now):
        self.op, self.kwargs, self.inputs, self.index = op, kwargs, inputs, index
        self.value, self.nbytes, self.cost = value, int(value.nbytes), cost
        self.last_used = now
        self.tensors: list[tuple[weakref.ref, int]] = []     # (tensor, its version)

    def bound(self):
        """The tensors that still hold this cell's value (or held it when evicted)."""
        for ref, version in self.tensors:
            t = ref()
            if t is not None and t._version == version:
                yield t


class Pool:
    """The candidate values of eager DTR and their memory."""

    def __init__(self):
        self.enabled = False
        self.threshold = 0
        self.minimum_size = 1 << 20
        self.sqrt_sampling = False
        self.used = 0                      # bytes held by resident candidates
        self.clock = 0.0                   # accumulated compute seconds
        self.evictions = self.recomputations = 0
        self._resident: set[_Cell] = set()
        self._cells: dict[int, tuple[weakref.ref, int, _Cell]] = {}
        self._rng = random.Random(0)
        self._pinned: list[_Cell] = []     # values a recomputation is using right now

    # -- dispatch's eager path --------------------------------------------------------
    def run(self, op, kwargs, inputs, arrays, device) -> tuple:
        start = time.perf_counter()
        values = op.run_eager(arrays, kwargs)
        cost = time.perf_counter() - start
        self.clock += cost + 1e-9
        outs = tuple(Tensor._wrap(v, device=device) for v in values)
        refs = None
        fresh = []
        for i, (t, v) in enumerate(zip(outs, values)):
            if getattr(v, "nbytes", 0) < max(self.minimum_size, 1):
                continue
            if refs is None:
                refs = tuple(self._input_ref(x, a) for x, a in zip(inputs, arrays))
            cell = _Cell(op, kwargs, refs, i, v, cost, self.clock)
            self._bind(t, cell)
            self._resident.add(cell)
            self.used += cell.nbytes
            fresh.append(cell)
        for x in inputs:
            cell = self.cell_of(x)
            if cell is not None:
                cell.last_used = self.clock
        if self.threshold > 0 and self.used > self.threshold:
            self.evict_until(self.threshold, exclude=set(fresh))
        return outs

    def share(self, source: Tensor, copy: Tensor) -> None:
        """`copy` holds `source`'s value (a tape's saved copy): evicted with it."""
        cell = self.cell_of(source)
        if cell is not None:
            self._bind(copy, cell)

    # -- cells ------------------------------------------------------------------------
    def cell_of(self, t: Tensor) -> _Cell | None:
        entry = self._cells.get(id(t))
        if entry is None or entry[0]() is not t or t._version != entry[1]:
            return None
        return entry[2]

    def _input_ref(self, t: Tensor, array):
        cell = self.cell_of(t)
        return cell if cell is not None else array

    def _bind(self, t: Tensor, cell: _Cell) -> None:
        key = id(t)

        def died(ref, key=key, cell=cell):
            entry = self._cells.get(key)
            if entry is not None and entry[0] is ref:
                del self._cells[key]
            if cell.value is not None and not any(True for _ in cell.bound()):
                self._release(cell)

        ref = weakref.ref(t, died)
        cell.tensors.append((ref, t._version))
        self._cells[key] = (ref, t._version, cell)

    def _release(self, cell: _Cell) -> None:
        if cell.value is not None:
            cell.value = None
            self._resident.discard(cell)
            self.used -= cell.nbytes

    # -- eviction ---------------------------------------------------------------------
    def score(self, cell: _Cell) -> float:
        cost = cell.cost + sum(i.cost for i in cell.inputs
                               if isinstance(i, _Cell) and i.value is None)
        return (cost + 1e-3) / ((cell.nbytes / 2 ** 20) *
                                (self.clock - cell.last_used + 1e-3))

    def evict_until(self, limit: int, exclude=()) -> None:
        while self.used > limit:
            candidates = [c for c in self._resident
                          if c not in exclude and c.nbytes >= self.minimum_size]
            if not candidates:
                return
            if self.sqrt_sampling and len(candidates) > 4:
                candidates = self._rng.sample(candidates, math.isqrt(len(candidates)))
            self.evict(min(candidates, key=self.score))

    def evict(self, cell: _Cell) -> None:
        for t in list(cell.bound()):
            if type(t) is Tensor:
                _SLOT.__set__(t, None)
                t.__class__ = EvictedTensor
        self._release(cell)
        self.evictions += 1

    def clear_candidates(self) -> None:
        """MegEngine's clear_candidates: nothing resident is evicted any more (evicted
        values still come back when read)."""
        self._resident.clear()
        self.used = 0

    # -- rematerialization ------------------------------------------------------------
    def materialize_tensor(self, t: Tensor):
        entry = self._cells.get(id(t))
        if entry is None or entry[0]() is not t:
            raise RuntimeError("DTR: an evicted tensor lost the record of how to compute "
                               "it")
        return self.materialize(entry[2])

    def materialize(self, cell: _Cell):
        """The cell's value, recomputed (its evicted inputs first) when released. Kept
        only while a Tensor is bound to it; else it serves this recomputation alone.
        As in MegEngine, recomputation may evict again (never the values it is using)."""
        if cell.value is not None:
            cell.last_used = self.clock
            return cell.value
        self._pinned.append(cell)
        try:
            args = []
            for i in cell.inputs:
                if isinstance(i, _Cell):
                    args.append(self.materialize(i))
                    self._pinned.append(i)
                else:
                    args.append(i)
            start = time.perf_counter()
            value = cell.op.run_eager(args, cell.kwargs)[cell.index]
            self.clock += time.perf_counter() - start + 1e-9
        finally:
            del self._pinned[self._pinned.index(cell):]
        self.recomputations += 1
        cell.last_used = self.clock
        holders = list(cell.bound())
        if holders:
            cell.value = value
            self._resident.add(cell)
            self.used += cell.nbytes
            for t in holders:
                if type(t) is EvictedTensor:
                    t.__class__ = Tensor
                    _SLOT.__set__(t, value)
            if self.enabled and self.threshold > 0 and self.used > self.threshold:
                self.evict_until(self.threshold, exclude={cell, *self._pinned})
        return value


POOL = Pool()
