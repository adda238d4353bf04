"""MegEngine's trace configuration classes, with its fields, defaults and validation.

They configure MegEngine's training-memory optimizations and JIT fusion:

- SublinearMemoryConfig: gradient checkpointing of a traced training step; the search
  that picks which forward values to drop and recompute is megtrace/jit/sublinear.py.
- DTRConfig: MegEngine's dynamic tensor rematerialization of a traced graph. A compiled
  megtrace graph has a static memory plan, so inside `trace` the same checkpoint planner
  serves it (see sublinear.plan_for_dtr); eager DTR is `megtrace.dtr`.
- GraphOptimizationConfig: what TVM fuses (see trace's docstring).

Bad values raise MegEngine's messages; MegEngine checks them with `assert`, so the error
is an AssertionError (and a ValueError, which is what it is).
"""
from __future__ import annotations

import os


class ConfigValueError(AssertionError, ValueError):
    """A config field out of range (MegEngine: a failed assert)."""


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ConfigValueError(message)


class SublinearMemoryConfig:
    """Sublinear memory optimization (gradient checkpointing) of a traced training step.

    - thresh_nr_try: thresholds tried, both across the whole range and around the best one,
      when the step's op sequence is split into blocks by the memory alive in a block.
    - genetic_nr_iter / genetic_pool_size: rounds of genetic refinement of the best block
      split points, and how many splits take part in each round.
    - lb_memory_mb: do not trade more recomputation for a peak lower than this (MB).
    - num_worker: MegEngine's search threads; megtrace's search is pure Python (a few ms
      per candidate) and runs in the calling thread, so it is validated and kept only.
    """

    def __init__(self, thresh_nr_try: int = 10, genetic_nr_iter: int = 0,
                 genetic_pool_size: int = 20, lb_memory_mb: int = 0,
                 num_worker: int = max(1, (os.cpu_count() or 2) // 2)):
        _check(thresh_nr_try >= 0, "thresh_nr_try must be greater or equal to zero")
        _check(genetic_nr_iter >= 0, "genetic_nr_iter must be greater or equal to zero")
        _check(genetic_pool_size >= 0, "genetic_pool_size must be greater or equal to zero")
        _check(num_worker > 0, "num_worker must be greater or equal to one")
        self.thresh_nr_try = thresh_nr_try
        self.genetic_nr_iter = genetic_nr_iter
        self.genetic_pool_size = genetic_pool_size
        self.lb_memory_mb = lb_memory_mb
        self.num_worker = num_worker


class DTRConfig:
    """DTR of a traced step. eviction_threshold (bytes, > 0 as MegEngine asserts): the
    peak the planner aims under with as little recomputation as it finds;
    evictee_minimum_size: smaller values are never dropped; recomp_memory_factor /
    recomp_time_factor: exponents of a value's size and of its recomputation cost in
    the choice of what to drop first (see sublinear.plan_for_dtr)."""

    def __init__(self, eviction_threshold: int = 0, evictee_minimum_size: int = 1 << 20,
                 recomp_memory_factor: float = 1, recomp_time_factor: float = 1):
        _check(eviction_threshold > 0, "eviction_threshold must be greater to zero")
        _check(evictee_minimum_size >= 0,
               "evictee_minimum_size must be greater or equal to zero")
        _check(recomp_memory_factor >= 0,
               "recomp_memory_factor must be greater or equal to zero")
        _check(recomp_time_factor >= 0, "recomp_time_factor must be greater or equal to zero")
        self.eviction_threshold = eviction_threshold
        self.evictee_minimum_size = evictee_minimum_size
        self.recomp_memory_factor = recomp_memory_factor
        self.recomp_time_factor = recomp_time_factor


class GraphOptimizationConfig:
    """None: opt_level decides; False: off; True: on."""

    def __init__(self):
        self.jit_fuse_dimshuffle = None
        self.jit_fuse_reduce = None

    def __repr__(self) -> str:
        show = {None: "UNSET", False: "OFF", True: "ON"}
        return (f"GraphOptimizationConfig {{ jit_fuse_dimshuffle = "
                f"{show[self.jit_fuse_dimshuffle]}, jit_fuse_reduce = "
                f"{show[self.jit_fuse_reduce]} }}")
