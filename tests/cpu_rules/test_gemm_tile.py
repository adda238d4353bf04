"""The packed-GEMM register tile (relay_bridge/cpu/primfunc.gemm_tile) for either vector
width, whatever the host: an AVX-512 host's 8 x 32 and an AVX2 host's 6 x 16 / 4 x 16
(16 ymm registers: 8 x 32 spilled and ran the encoder at 0.63x the peers on a Zen 1
core). Dense, batched matmul and fused attention are compared with float64 NumPy at row
counts that pad the tile and ones that do not."""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge._tvm import tvm
from megtrace.relay_bridge.cpu import primfunc
from megtrace.relay_bridge.cpu.dense import DenseShape, dense_packed
from megtrace.relay_bridge.cpu.layout import pack_dense_weight
from megtrace.relay_bridge.cpu.matmul import MatmulShape, batch_matmul
from megtrace.relay_bridge.targets import resolve

TOL = 1e-5


@pytest.fixture(params=[8, 16], ids=["avx2", "avx512"])
def lanes(request, monkeypatch):
    monkeypatch.setattr(primfunc, "vector_lanes", lambda: request.param)
    return request.param


def _run(func, arrays, out_shape):
    t = tvm()
    lib = t.compile(t.IRModule({"main": func.with_attr("global_symbol", "main")}),
                    target=resolve(None))
    dev = t.cpu(0)
    args = [t.runtime.tensor(np.ascontiguousarray(a), dev) for a in arrays]
    out = t.runtime.tensor(np.zeros(out_shape, np.float32), dev)
    lib["main"](*args, out)
    return out.numpy()


def test_tiles_fit_the_vector_registers(lanes):
    for m, n in [(1, 64), (3, 40), (7, 48), (12, 96), (13, 16), (128, 3072), (1024, 768)]:
        mr, nr = primfunc.gemm_tile(m, n)
        accumulators = mr * nr // lanes
        assert mr <= m and accumulators <= (16 if lanes == 16 else 12), (m, n, mr, nr)
    if lanes == 8:      # the row count that pads least: 128 rows in 4s, 132 in 6s
        assert primfunc.gemm_tile(128, 768) == (4, 16)
        assert primfunc.gemm_tile(132, 768) == (6, 16)
    else:
        assert primfunc.gemm_tile(128, 768) == (8, 32)


@pytest.mark.parametrize("m,k,n", [(5, 24, 40), (13, 36, 48), (128, 64, 96), (14, 17, 16)])
def test_dense_matches_numpy(lanes, m, k, n, rng):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    shape = DenseShape(m, k, n)
    out = _run(dense_packed(shape), [a, pack_dense_weight(b, False, shape.tile[1])], (m, n))
    assert rel_err(out, a.astype(np.float64) @ b) < TOL


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("m,k,n", [(7, 20, 32), (16, 9, 48)])
def test_batched_matmul_matches_numpy(lanes, m, k, n, transpose_b, rng):
    a = rng.uniform(-1, 1, (3, m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (3, n, k) if transpose_b else (3, k, n)).astype(np.float32)
    shape = MatmulShape(a.shape, b.shape, False, transpose_b)
    out = _run(batch_matmul(shape), [a, b], shape.out)
    ref = a.astype(np.float64) @ (np.swapaxes(b, -1, -2) if transpose_b else b)
    assert rel_err(out, ref) < TOL


@pytest.mark.parametrize("s", [13, 32])
def test_fused_attention_matches_numpy(lanes, s, rng):
    heads, d = 2, 32

    def fn(q, k, v):
        p = F.softmax(F.matmul(q, k, transpose_b=True) / math.sqrt(d), axis=-1)
        return F.matmul(p, v)
    q, k, v = (rng.uniform(-1, 1, (1, heads, n, d)).astype(np.float32)
               for n in (s, 48, 48))
    traced = trace(symbolic=True, capture_as_const=True)(fn)
    traced(*(mge.tensor(x) for x in (q, k, v)))
    compiled = compile_graph(traced.graph)
    assert compiled.rules == ["attention"]
    out = compiled(q, k, v)[0]
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    assert rel_err(np.asarray(out), ref) < TOL


@pytest.mark.parametrize("target,packed", [("x86-avx2", "(6, 64, 16)"),
                                           ("x86-avx512", "(3, 64, 32)")])
def test_tiles_follow_the_build_target_not_the_host(target, packed):
    """A library built for another x86 target (an AVX2 deploy machine from an AVX-512
    host, or the reverse) gets that target's tiles: the dense weight packed in 16- or
    32-column panels."""
    from megtrace.relay_bridge.pipelines import lower_graph
    w = mge.tensor(np.ones((64, 96), np.float32))
    traced = trace(symbolic=True, capture_as_const=True)(lambda x: F.matmul(x, w))
    traced(mge.tensor(np.ones((12, 64), np.float32)))
    mod, used = lower_graph(traced.graph, resolve(target), "rules")
    assert used == ["dense"]
    (dense,) = [f for f in mod.functions.values()
                if (f.attrs or {}).get("megtrace.rule") == "dense_packed"]
    assert f'b: T.Buffer({packed}, "float32")' in dense.script()
