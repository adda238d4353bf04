"""MegEngine's trace configuration classes, with its fields and validation.

They configure MegEngine's training-memory optimizations (sublinear checkpointing, DTR)
and JIT fusion. megtrace's compiled graphs keep every value a traced training step needs
(no recomputation), so the memory configs are recorded on the trace
(`trace.sublinear_memory_config`, `trace.dtr_config`) but change nothing;
GraphOptimizationConfig selects what TVM fuses (see trace's docstring).
"""
from __future__ import annotations

import os


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


class SublinearMemoryConfig:
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
    """MegEngine asserts eviction_threshold > 0 even for its default of 0; here the
    default means "no threshold set" so that `DTRConfig()` works."""

    def __init__(self, eviction_threshold: int = 0, evictee_minimum_size: int = 1 << 20,
                 recomp_memory_factor: float = 1, recomp_time_factor: float = 1):
        _check(eviction_threshold >= 0, "eviction_threshold must be greater or equal to zero")
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
