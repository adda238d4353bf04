"""bench/bench_models.py runs end to end on the smallest model (one short timing per
runtime, no timing asserted): megtrace's two call paths give the eager model's
output, and every peer either ran, on the same output, or says it is not installed.
bench/bench_tuning.py's pairing of rule kernels with tuned kernels, on made-up calls."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_tuning  # noqa: E402


@pytest.mark.slow
def test_bench_models_smoke(tmp_path):
    out = tmp_path / "result"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_models.py"), "--models", "mlp", "--batches", "1",
         "--threads", "1", "--runtimes", "megtrace,onnxruntime,openvino", "--min-time",
         "0.01", "--no-overhead", "--work-dir", str(tmp_path / "work"), "--out", str(out),
         "--bench-python", sys.executable],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.with_suffix(".json").read_text())
    (row,) = result["rows"]
    mt = row["megtrace"]
    assert mt["median_ms"] > 0 and mt["without_host_ms"] > 0 and mt["flops"] == 2 * (
        784 * 1024 + 1024 * 512 + 512 * 10)
    # the worker's output of the default call is the model's eager output
    sys.path.insert(0, str(BENCH))
    import megtrace as mge
    import nets
    net = nets.build("mlp")
    x = np.load(tmp_path / "work" / "mlp_b1" / "inputs.npz")["data"]
    want = net(mge.tensor(x)).numpy()
    got = np.load(tmp_path / "work" / "mlp_b1" / "out_megtrace_t1.npy")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for peer in ("onnxruntime", "openvino"):
        r = row[peer]
        assert "error" not in r, r
        assert "missing" in r or r["err"] < 1e-4, r
    md = out.with_suffix(".md").read_text()
    assert "| MLP 784-1024-512-10 | 1 | 1 |" in md
    assert "n/a (not installed)" in md or "missing" not in json.dumps(row)


def test_rule_kernels_pair_with_tuned_kernels_in_call_order():
    rules = [("conv", 10.0), ("fused_reshape_transpose", 1.0), ("depthwise3", 4.0),
             ("dense", 2.0), ("fused_reshape10_add3_gelu_reshape11", 3.0)]
    tuned = [("fused_conv2d_add", 8.0), ("fused_strided_slice1_reshape3", 1.0),
             ("fused_conv2d1_add_clip", 2.0), ("fused_matmul_add", 4.0),
             ("fused_reshape10_add3_gelu_reshape11", 3.0)]
    pairs = bench_tuning.pair_kernels(rules, tuned)
    assert [(p["rule"], p["tuned"], p["kind"]) for p in pairs] == [
        ("conv", "fused_conv2d_add", "conv"), ("depthwise3", "fused_conv2d1_add_clip",
                                               "depthwise"),
        ("dense", "fused_matmul_add", "dense"),
        ("fused_reshape10_add3_gelu_reshape11", "fused_reshape10_add3_gelu_reshape11", "other")]
    kinds = bench_tuning.by_kind(pairs)
    assert kinds["depthwise"] == dict(calls=1, rules_us=4.0, tuned_us=2.0, wins=1)
    assert kinds["dense"]["wins"] == 0
    assert bench_tuning.pair_kernels(rules, tuned[:3]) is None


def test_tuner_picks_reads_the_best_record_of_each_workload(tmp_path):
    folder = tmp_path / "llvm-znver4-t1-abcd"
    folder.mkdir()
    (folder / "database_workload.json").write_text('["123", "mod"]\n')
    insts = [["SamplePerfectTile", ["l0"], [2, 64], ["v1", "v2"]],
             ["SampleCategorical", [], [[0, 16, 64, 512], [0.25] * 4], ["v3"]],
             ["Annotate", ["b4", 16], ["meta_schedule.parallel"], []],
             ["Annotate", ["b4", "v3"], ["meta_schedule.unroll_explicit"], []]]
    slow = [0, [[insts, [[0, [4, 32]], [1, 1]]], [2e-4, 4e-4], {}, []]]
    fast = [0, [[insts, [[0, [16, 8]], [1, 2]]], [1e-4, 1e-4], {}, []]]
    (folder / "database_tuning_record.json").write_text(
        "\n".join(json.dumps(r) for r in (slow, fast)) + "\n")
    (folder / "decisions.json").write_text(json.dumps({"123": {"name": "softmax",
                                                               "kept": True}}))
    (pick,) = bench_tuning.tuner_picks(tmp_path)
    assert pick["name"] == "softmax" and pick["kept"] is True
    assert abs(pick["best_us"] - 100.0) < 1e-6
    assert pick["picks"] == "tile 16x8, parallel 16, unroll_explicit 64"


def test_bench_replay_smoke():
    """bench/bench_replay.py on the demo net: it checks that the replay before the
    compiled run, the run beside it and without_host agree, and prints every figure."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_replay.py"), "--models", "demo", "--ops", "20",
         "--rounds", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "per-op: 20 x F.relu" in proc.stdout
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("demo: first call")]
    assert any(ln.startswith("demo: the replay's Python alone") for ln in proc.stdout.splitlines())
    assert "MEGTRACE_REPLAY_OVERLAP=0" in line and "beside it (=1)" in line, line


def test_fma_peak_kernel_runs_the_chains_it_counts():
    """The peak kernel computes x = x * MUL + ADD `n` times on every lane of every chain
    (NumPy's float32 recurrence), so the flops it divides by are the flops it ran; the
    figure is a positive rate."""
    import fma_peak
    from megtrace.relay_bridge._tvm import tvm
    from megtrace.relay_bridge.cpu.primfunc import vector_lanes
    lanes = vector_lanes()
    x0 = np.random.default_rng(0).uniform(-4, 4, (fma_peak.CHAINS, lanes)).astype("float32")
    x = tvm().runtime.tensor(x0)
    fma_peak.compiled(lanes)(x, 37)
    want = x0.copy()
    for _ in range(37):
        want = want * np.float32(fma_peak.MUL) + np.float32(fma_peak.ADD)
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-5, atol=1e-6)
    assert fma_peak.fma_peak_gflops(steps=20_000, runs=2) > 0


def test_profile_kernels_counts_the_useful_flops_of_each_rule_kernel():
    """bench/profile_kernels.py's GFLOP/s column: the rule kernels a profiled run calls are
    found by name in the re-lowered graph, their useful flops add up to the MLP's three
    GEMMs, and TVM's estimate of what each computes is at least that (padding, epilogue)."""
    import profile_kernels
    from megtrace.relay_bridge.profile import profile_run
    compiled, arrays = profile_kernels.inference("mlp", 1)
    flops = profile_kernels.kernel_flops(compiled)
    calls = {n: c for n, (_, c) in profile_kernels.kernel_times(
        profile_run(compiled, arrays)[1]).items()}
    assert set(flops) <= set(calls)
    assert sum(flops[n][0] * calls[n] for n in flops) == 2 * (784 * 1024 + 1024 * 512 + 512 * 10)
    assert all(work is None or work >= useful for useful, work in flops.values())
