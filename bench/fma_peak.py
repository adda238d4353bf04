"""Measured float32 FMA peak of one thread of this host (GFLOP/s), for bench %peak columns.

bench_report.py used to divide by 230 GFLOP/s per thread, the Xeon host's figure (2 FMA
ports x 16 lanes x 2 flops x ~3.6 GHz). On a Zen 4 host AVX-512 is double-pumped: one
16-lane FMA per cycle, ~116 GFLOP/s at its ~3.6 GHz boost, so the same column read 42 %
where the encoder ran at ~85 % of what the core can do. The clock a VM reports
(/proc/cpuinfo: 2.6 GHz there) is not the one it runs at, so the peak is measured:
CHAINS independent FMA chains of the widest vector (vector_lanes()) in registers, one
thread, process CPU time (a loaded host deschedules the process, it does not slow the
core), the best of a few runs. 12 chains cover an FMA latency of 4-6 cycles at up to two
FMAs per cycle.
"""
from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

CHAINS = 12
MUL, ADD = 0.999, 0.001          # acc * MUL + ADD stays finite for any number of steps


def kernel(lanes: int) -> Any:
    """The TIR PrimFunc (x (CHAINS, lanes) in and out, n): n times x = x * MUL + ADD."""
    from tvm.script import tirx as T

    @T.prim_func
    def fma_chains(x: T.Buffer((CHAINS, lanes), "float32"), n: T.int32):
        acc = T.alloc_buffer((CHAINS, lanes), "float32", scope="local")
        for r in T.unroll(CHAINS):
            for lane in T.vectorized(lanes):
                acc[r, lane] = x[r, lane]
        for _ in range(n):
            for r in T.unroll(CHAINS):
                for lane in T.vectorized(lanes):
                    acc[r, lane] = acc[r, lane] * T.float32(MUL) + T.float32(ADD)
        for r in T.unroll(CHAINS):
            for lane in T.vectorized(lanes):
                x[r, lane] = acc[r, lane]
    return fma_chains


@functools.lru_cache(maxsize=None)
def compiled(lanes: int) -> Any:
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.targets import host_target
    t = tvm()
    return t.compile(t.IRModule({"main": kernel(lanes)}), target=host_target())["main"]


def fma_peak_gflops(steps: int = 2_000_000, runs: int = 5) -> float:
    """GFLOP/s of one thread running independent vector FMAs (2 flops per lane)."""
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu.primfunc import vector_lanes
    lanes = vector_lanes()
    fn = compiled(lanes)
    x = tvm().runtime.tensor(np.ones((CHAINS, lanes), "float32"))
    fn(x, 1000)                                     # warm up (page faults, clocks)
    best = 0.0
    for _ in range(runs):
        # this thread's CPU time: a worker that ran TVM on 2 threads has a pool thread
        # spinning beside it, which process_time would count (a peak read as half)
        start = time.thread_time()
        fn(x, steps)
        cpu = time.thread_time() - start
        if cpu > 0:
            best = max(best, 2 * CHAINS * lanes * steps / cpu / 1e9)
    return best


if __name__ == "__main__":
    print(f"{fma_peak_gflops():.1f} GFLOP/s per thread")
