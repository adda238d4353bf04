"""Sublinear memory for traced training steps: gradient checkpointing by recomputation.

A traced training step is one graph: forward, backward (the VJPs, recorded as ordinary
ops) and the update. The backward pass reads forward values long after they were made,
so all of them are alive at once at the turn of the step. Here, as in MegEngine's
seq_sublinear_memory.cpp, the node sequence is split into blocks by a threshold on the
memory made in a block; a value still needed after its block is dropped after the access
before its longest idle gap and recomputed (its producers within its block re-emitted)
just before the next access; the last values of a block stay (they are the checkpoints).
Which threshold (and which split points) is best is searched by simulating each plan's
peak memory: thresholds in log and linear space (`thresh_nr_try` each), optionally a
genetic refinement of the split points, and `lb_memory_mb` as a floor below which less
recomputation is preferred. The chosen plan is re-emitted as a new Graph, which TVM's
static memory planner then lays out (no CSE runs after this, so the copies stay).
"""
from __future__ import annotations

import random
import sys
from dataclasses import dataclass

import numpy as np

from ..ir import Graph, Node, Var

_END = sys.maxsize     # the time graph outputs are read: after every node


@dataclass
class Plan:
    splits: tuple[int, ...]          # the last node of each block
    entries: list                    # (node, input keys, output keys) in run order
    peak: int                        # simulated peak bytes of node outputs alive
    recompute_cost: int              # bytes read and written by re-emitted nodes


class _Sequence:
    """The graph's nodes as an op sequence: producer time, size and readers of each value."""

    def __init__(self, graph: Graph, min_discard_size: int = 0, donated: bool = False):
        self.graph = graph
        self.nodes = graph.nodes
        self.time_of: dict[Var, int] = {}
        self.size: dict[Var, int] = {}
        self.readers: dict[Var, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for v in node.outputs:
                self.time_of[v] = i
                self.size[v] = v.type.size * _itemsize(v.type.dtype)
                self.readers[v] = []
            for v in dict.fromkeys(node.inputs):
                if v in self.readers:
                    self.readers[v].append(i)
        outputs = set(graph.outputs)
        for v in outputs:
            if v in self.readers:
                self.readers[v].append(_END)
        if donated:     # written over the input it replaces: no memory of its own
            for v in donated_outputs(graph):
                self.size[v] = 0
        self.recomputable = [not (n.op.value_shaped or n.op.interpreted) for n in self.nodes]
        self.discardable = {v for v in self.time_of if v not in outputs
                            and self.recomputable[self.time_of[v]]
                            and self.size[v] >= max(min_discard_size, 1)}
        self.cost = [sum(self.size.get(v, 0) for v in n.inputs + n.outputs) for n in self.nodes]

    def last_reader(self, v: Var) -> int:
        r = self.readers[v]
        return r[-1] if r else self.time_of[v]

    # -- MegEngine's steps ----------------------------------------------------------------
    def split_points(self, thresh: int) -> tuple[int, ...]:
        """Close a block when the memory made in it and still alive reaches `thresh`."""
        points, alive, usage = [], set(), 0
        for i, node in enumerate(self.nodes):
            for v in node.outputs:
                alive.add(v)
                usage += self.size[v]
            for v in node.inputs:
                if v in alive and self.last_reader(v) == i:
                    alive.discard(v)
                    usage -= self.size[v]
            if i + 1 < len(self.nodes) and usage < thresh:
                continue
            points.append(i)
            alive, usage = set(), 0
        return tuple(points)

    def plan(self, splits: tuple[int, ...]) -> Plan:
        discards = self._discards(splits)
        entries, cost = self._apply(splits, discards)
        return Plan(splits, entries, self._peak(entries), cost)

    def _blocks(self, splits):
        begin = 0
        for end in splits:
            yield begin, end + 1
            begin = end + 1

    def _discards(self, splits) -> dict[Var, tuple[int, int]]:
        """value -> (drop after this access, recompute before this one)."""
        discards: dict[Var, tuple[int, int]] = {}
        previous: set[Var] = set()
        for begin, end in self._blocks(splits):
            current: set[Var] = set()
            for i in range(begin, end):
                for v in self.nodes[i].outputs:
                    if v not in self.discardable or self.last_reader(v) < end:
                        continue
                    access = [i] + self.readers[v]
                    k = max(j for j, t in enumerate(access) if t < end)
                    best, stride = None, 0
                    single = len(self.nodes[i].outputs) == 1
                    for j in range(k, len(access) - 1):
                        if j == 0 and single:
                            continue      # never drop a value before its first reader
                        gap = access[j + 1] - access[j]
                        if gap > len(self.nodes[access[j + 1]].inputs) and gap > stride:
                            best, stride = j, gap
                    if best is not None:
                        discards[v] = (access[best], access[best + 1])
                        current.add(v)
            for v in self.nodes[end - 1].outputs:      # a block's last values: checkpoints
                discards.pop(v, None)
                current.discard(v)
            for v in previous:      # dropped after the previous block, read again in this
                if v in discards and begin <= discards[v][1] < end:
                    del discards[v]
            previous = current
        return discards

    def _apply(self, splits, discards) -> tuple[list, int]:
        block_begin = [0] * len(self.nodes)
        for begin, end in self._blocks(splits):
            block_begin[begin:end] = [begin] * (end - begin)
        pending: dict[int, list[Var]] = {}
        for v, (_, at) in discards.items():
            pending.setdefault(at, []).append(v)
        copy: dict[Var, tuple] = {}
        alive_until: dict[tuple, int] = {}
        entries: list = []
        generation = [0]
        cost = [0]

        def current(u: Var, now: int, floor: int):
            if u not in self.time_of:
                return u                               # graph input or constant
            key = copy[u]
            if alive_until[key] >= now:
                return key
            p = self.time_of[u]
            if p < floor or not self.recomputable[p]:
                return key                             # kept longer instead
            node = self.nodes[p]
            ins = [current(x, now, floor) for x in node.inputs]
            generation[0] += 1
            outs = [(o, generation[0]) for o in node.outputs]
            entries.append((node, ins, outs))
            cost[0] += self.cost[p]
            for o, k in zip(node.outputs, outs):
                copy[o] = k
                alive_until[k] = max(now, self.last_reader(o))
            return copy[u]

        for i, node in enumerate(self.nodes):
            for v in pending.get(i, ()):
                current(v, i, block_begin[self.time_of[v]])
            ins = [copy[v] if v in self.time_of else v for v in node.inputs]
            outs = [(v, 0) for v in node.outputs]
            entries.append((node, ins, outs))
            for v, k in zip(node.outputs, outs):
                copy[v] = k
                alive_until[k] = discards[v][0] if v in discards else self.last_reader(v)
        self._final = {v: copy[v] for v in self.graph.outputs if v in copy}
        return entries, cost[0]

    def _peak(self, entries) -> int:
        last: dict = {}
        for j, (_, ins, _) in enumerate(entries):
            for k in ins:
                last[k] = j
        for k in self._final.values():
            last[k] = _END
        usage = peak = 0
        for j, (_, ins, outs) in enumerate(entries):
            for k in outs:
                usage += self.size[k[0]]
            peak = max(peak, usage)
            for k in outs:
                if k not in last:
                    usage -= self.size[k[0]]
            for k in set(ins):
                if isinstance(k, tuple) and last.get(k) == j:
                    usage -= self.size[k[0]]
        return peak

    def emit(self, plan: Plan) -> Graph:
        """The plan as a graph: original nodes keep their values, copies get new ones."""
        g = self.graph
        new = Graph(list(g.inputs), dict(g.consts), [], [], list(g.input_names))
        var_of: dict = {}
        for node, ins, outs in plan.entries:
            in_vars = tuple(var_of[k] if isinstance(k, tuple) else k for k in ins)
            out_vars = tuple(k[0] if k[1] == 0 else
                             Var(k[0].type, f"{k[0].name_hint}:recompute") for k in outs)
            var_of.update(zip(outs, out_vars))
            new.nodes.append(Node(node.op, in_vars, node.params, out_vars))
        final = {}
        for node, ins, outs in plan.entries:      # the latest copy of each output
            for k in outs:
                final[k[0]] = var_of[k]
        new.set_outputs([final.get(v, v) for v in g.outputs], g.output_names)
        return new.prune()


def _itemsize(dtype: str) -> int:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return 4


class Searcher:
    """MegEngine's ActionSearcherSingleCN: thresholds, genetic refinement, lower bound."""

    def __init__(self, seq: _Sequence):
        self.seq = seq
        self.records: dict[tuple, Plan] = {}
        self.best: Plan | None = None
        self.best_thresh = 0

    def _try(self, splits: tuple[int, ...], thresh: int | None = None) -> Plan:
        plan = self.records.get(splits)
        if plan is None:
            plan = self.records[splits] = self.seq.plan(splits)
        b = self.best
        if b is None or plan.peak < b.peak or (plan.peak == b.peak and (
                thresh is not None and thresh > self.best_thresh)):
            self.best = plan
            if thresh is not None:
                self.best_thresh = thresh
        return plan

    def _try_thresh(self, thresh: int) -> None:
        self._try(self.seq.split_points(thresh), thresh)

    def search_preset(self, nr_try: int) -> None:
        self._try_thresh(_END)
        init = self.best.peak
        thresh = init >> 1
        while thresh >= 1024:
            self._try_thresh(thresh)
            thresh >>= 1
        if nr_try:
            step = init // (nr_try + 1)
            for i in range(1, nr_try + 1):
                self._try_thresh(max(step * i, 1))
            start = self.best_thresh // 2
            step = (self.best_thresh * 2 - start) // max(nr_try - 1, 1)
            for i in range(nr_try):
                self._try_thresh(max(start + step * i, 1))

    def search_genetic(self, nr_iter: int, pool_size: int, seed: int = 2333) -> None:
        rng = random.Random(seed)
        n = len(self.seq.nodes)

        def mutation(s: tuple) -> tuple:
            s, kind, p = list(s), rng.randrange(4), rng.randrange(len(s))
            start = s[p - 1] + 1 if p else 0
            if kind == 0 and s[p] > start:          # insert a split point
                s.insert(p, start + rng.randrange(s[p] - start))
            elif kind == 1 and p < len(s) - 1:      # remove one
                del s[p]
            elif kind == 2 and p < len(s) - 1 and s[p + 1] - 1 > start:   # move one
                s[p] = start + rng.randrange(s[p + 1] - start)
            return tuple(sorted(set(s)))

        def crossover(a: tuple, b: tuple) -> tuple:
            p = rng.randrange(max(n // 2, 1))
            return tuple(sorted(set([x for x in a if x < p] + [x for x in b if x >= p])))

        for _ in range(nr_iter):
            ranked = sorted(self.records.values(), key=lambda r: (r.peak, r.splits))
            pool = ranked[:max(min(pool_size, len(ranked)), 1)]
            order = list(range(len(pool)))
            rng.shuffle(order)
            for i, plan in enumerate(pool):
                self._try(mutation(mutation(plan.splits)))
                self._try(crossover(plan.splits, pool[order[i]].splits))

    def search_refine(self, lower_bound: int) -> None:
        """Below `lower_bound` bytes, buy back speed: close blocks at the costliest
        recomputed nodes until the peak reaches the bound (MegEngine's search_refine)."""
        if self.best.peak >= lower_bound:
            return
        times = {id(n): i for i, n in enumerate(self.seq.nodes)}
        dups = sorted({times[id(node)] for node, _, outs in self.best.entries
                       if outs and outs[0][1] != 0}, key=lambda t: -self.seq.cost[t])
        splits = list(self.best.splits)
        for t in dups:
            splits = sorted(set(splits + [t]))
            plan = self._try_plain(tuple(splits))
            if plan.peak >= lower_bound:
                self.best = plan
                return

    def _try_plain(self, splits: tuple) -> Plan:
        plan = self.records.get(splits)
        if plan is None:
            plan = self.records[splits] = self.seq.plan(splits)
        return plan


def donated_outputs(graph: Graph) -> list[Var]:
    """Outputs the compiled run may write over an input (same shape and dtype: a new
    parameter or optimizer state; relay_bridge/donate.py decides which it can)."""
    types = {(v.type.shape, v.type.dtype) for v in graph.inputs}
    return [v for v in graph.outputs if (v.type.shape, v.type.dtype) in types]


def checkpoint_graph(graph: Graph, config) -> Graph:
    """`graph` with sublinear-memory recomputation as `config` (SublinearMemoryConfig)
    asks; unchanged when no plan lowers the simulated peak. The plan counts no memory
    for the outputs written over inputs (donated_outputs)."""
    seq = _Sequence(graph, donated=True)
    if not seq.discardable:
        return graph
    search = Searcher(seq)
    search.search_preset(config.thresh_nr_try)
    unchanged = search.records[seq.split_points(_END)].peak
    if config.genetic_nr_iter:
        search.search_genetic(config.genetic_nr_iter, config.genetic_pool_size)
    search.search_refine(int(config.lb_memory_mb) << 20)
    if search.best.peak >= unchanged:
        return graph
    return seq.emit(search.best)


def plan_for_dtr(graph: Graph, config) -> Graph:
    """DTRConfig inside trace: a compiled graph's memory is planned ahead, so eviction
    becomes a checkpoint plan. Only values of at least `evictee_minimum_size` bytes may
    be dropped; among the plans the search finds, those whose simulated peak stays under
    `eviction_threshold` compete on recompute_cost ** recomp_time_factor * peak **
    recomp_memory_factor; when none does, the lowest peak wins."""
    seq = _Sequence(graph, config.evictee_minimum_size, donated=True)
    if not seq.discardable:
        return graph
    search = Searcher(seq)
    search.search_preset(10)
    unchanged = search.records[seq.split_points(_END)].peak
    if unchanged <= config.eviction_threshold:
        return graph
    fits = [p for p in search.records.values() if p.peak <= config.eviction_threshold]
    if fits:
        best = min(fits, key=lambda p: (float(p.recompute_cost) ** config.recomp_time_factor
                                        * float(p.peak) ** config.recomp_memory_factor,
                                        p.peak))
    else:
        best = search.best
    if best.peak >= unchanged:
        return graph
    return seq.emit(best)


def simulated_peak(graph: Graph, donated: bool = False) -> int:
    """Peak bytes of node outputs alive at once when `graph` runs in node order (what
    the planner minimizes; TVM's static plan comes close, fusion aside); `donated`: not
    counting the outputs written over inputs (donated_outputs)."""
    seq = _Sequence(graph, donated=donated)
    return seq.plan(seq.split_points(_END)).peak
