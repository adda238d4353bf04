"""Dense GEMMs on AMX tiles (relay_bridge/cpu/amx.py): bf16 hi/lo split, tile packing,
the kernel against NumPy in float64, and the rule's choice in a compiled graph."""
from __future__ import annotations

import numpy as np
import pytest

from megtrace.ir import Graph, TensorType
from megtrace.ops import get
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.cpu import amx
from megtrace.relay_bridge.targets import AMX_ENV, amx_wanted

needs_amx = pytest.mark.skipif(not amx_wanted(), reason="this CPU or OS lends no AMX tiles")


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_split_carries_sixteen_mantissa_bits(rng):
    x = rng.standard_normal(10000).astype(np.float32) * np.float32(1e3)
    hi, lo = amx.split_bf16(x)
    back = _bf16_to_f32(hi).astype(np.float64) + _bf16_to_f32(lo)
    assert np.all(np.abs(back - x) <= np.abs(x) * 2.0 ** -16)
    # hi is x rounded to nearest even bfloat16: never more than half an ulp away
    assert np.all(np.abs(_bf16_to_f32(hi) - x) <= np.abs(x) * 2.0 ** -8)
    ties = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8], np.float32)   # halfway cases
    assert list(_bf16_to_f32(amx.split_bf16(ties)[0])) == [1.0, 1.0 + 2.0 ** -6]


def test_split_keeps_infinities_and_nan():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    hi, lo = amx.split_bf16(x)
    got = _bf16_to_f32(hi)
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    assert list(lo[:2]) == [0, 0] and list(got[3:]) == [0.0, 0.0]


def test_packed_weight_holds_each_part_at_its_tile_position(rng):
    k, n = 64, 48
    w = rng.standard_normal((k, n)).astype(np.float32)
    packed = amx.pack_weight(w, transpose_b=False)
    assert packed.shape == (n // 16, k // 32, 2, 16, 32) and packed.dtype == np.uint16
    hi, lo = amx.split_bf16(w)
    for kk, col in ((0, 0), (1, 0), (33, 17), (63, 47), (40, 31)):
        for part, want in ((0, hi), (1, lo)):
            got = packed[col // 16, kk // 32, part, (kk % 32) // 2, (col % 16) * 2 + kk % 2]
            assert got == want[kk, col]
    assert np.array_equal(amx.pack_weight(w.T.copy(), transpose_b=True), packed)


def _dense_graph(a: np.ndarray, w: np.ndarray, bias: np.ndarray | None, gelu: bool,
                 residual: np.ndarray | None = None):
    g = Graph()
    x = g.add_input(TensorType.of(a), "x")
    y = g.add_node(get("matmul"), [x, g.add_const(w)], {"transpose_b": True})[0]
    if bias is not None:
        y = g.add_node(get("add"), [y, g.add_const(bias)], {})[0]
    if gelu:
        y = g.add_node(get("gelu"), [y], {})[0]
    if residual is not None:
        r = g.add_input(TensorType.of(residual), "r")
        y = g.add_node(get("add"), [r, y], {})[0]
    g.set_outputs([y], ["y"])
    return g


def _gelu(x: np.ndarray) -> np.ndarray:
    from math import erf, sqrt
    return x * 0.5 * (1.0 + np.vectorize(erf)(x / sqrt(2.0)))


@needs_amx
@pytest.mark.parametrize("m,k,n,bias,gelu", [(16, 32, 32, False, False),
                                             (48, 96, 64, True, False),
                                             (128, 768, 256, True, True),
                                             (512, 1024, 64, True, False)])
def test_amx_dense_matches_float64(m, k, n, bias, gelu, rng):
    """One k block, several (768: three of KC tile steps), two row groups (512 x 1024)."""
    assert amx.group_rows(512, 1024) == 256 and amx.group_rows(128, 3072) == 128
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    cg = compile_graph(_dense_graph(a, w, b, gelu))
    assert cg.rules == ["dense"]
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    if bias:
        want = want + b
    if gelu:
        want = _gelu(want)
    got = cg(a)[0]
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    # the split keeps float32's accuracy to within a few ulps of the largest output
    assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max()


@needs_amx
def test_amx_dense_with_bias_and_residual_epilogue(rng):
    """The epilogue runs in place on each stored block: a per-column bias and a
    runtime tensor (a transformer's residual) read at the block's rows and columns."""
    m, k, n = 64, 128, 96
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    cg = compile_graph(_dense_graph(a, w, b, False, r))
    assert cg.rules == ["dense"]
    want = r + (a.astype(np.float64) @ w.T.astype(np.float64) + b)
    assert np.abs(cg(a, r)[0] - want).max() <= 2e-5 * np.abs(want).max()


@needs_amx
def test_amx_rule_is_taken_only_for_whole_tiles_and_when_allowed(rng, monkeypatch):
    from megtrace.relay_bridge.cpu import lower
    taken = []
    real = amx.dense_amx
    monkeypatch.setattr(lower.amx_rule, "dense_amx",
                        lambda *a, **kw: taken.append(a[0]) or real(*a, **kw))
    for m, k, n in ((32, 64, 64), (8, 64, 64), (32, 48, 64), (32, 64, 48)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        cg = compile_graph(_dense_graph(a, w, None, False))
        want = a.astype(np.float64) @ w.T.astype(np.float64)
        assert np.abs(cg(a)[0] - want).max() <= 1e-4 * np.abs(want).max()
    assert taken == [amx.AmxShape(32, 64, 64)]
    monkeypatch.setenv(AMX_ENV, "0")
    a = rng.standard_normal((32, 64)).astype(np.float32)
    compile_graph(_dense_graph(a, rng.standard_normal((64, 64)).astype(np.float32),
                               None, False))
    assert len(taken) == 1


@needs_amx
def test_exported_amx_library_runs_in_a_fresh_process(rng, tmp_path):
    """deploy.py (standalone) asks Linux for the tile state before it loads a library
    built with AMX: without it the first tile instruction would kill the process."""
    from megtrace.relay_bridge.export import export
    from perf.helpers import run_exported_fresh
    a = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    cg = compile_graph(_dense_graph(a, w, None, False))
    done = export(cg, tmp_path / "amx.so")
    outs, _ = run_exported_fresh(done.library, {"x": a}, tmp_path)
    assert np.array_equal(outs[0], cg(a)[0])


@pytest.mark.parametrize("m,k,n", [(48, 96, 64), (128, 768, 64), (512, 1024, 64)])
def test_emulated_dense_tile_program_matches_float64(m, k, n, rng):
    """dense_amx's tile program through amx.EmulatedTiles (plain TIR, any host): its
    tile addresses, k blocks (768: three of KC steps) and row groups (512 x 1024: two)."""
    from megtrace.relay_bridge._tvm import tvm
    t = tvm()
    func = amx.dense_amx(amx.AmxShape(m, k, n), emulate=True).with_attr("global_symbol", "main")
    lib = t.compile(t.IRModule({"main": func}), target="llvm")
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    args = [t.runtime.tensor(x) for x in (a, amx.pack_weight(w, transpose_b=True),
                                          amx.tile_config(), np.full((m, n), np.nan, np.float32))]
    lib["main"](*args)
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    assert np.abs(args[-1].numpy() - want).max() <= 2e-5 * np.abs(want).max()
