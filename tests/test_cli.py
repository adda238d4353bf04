"""The `megtrace` command line on MegEngine's own files."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
       "COLUMNS": "200"}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "megtrace.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=ENV)


def test_info_and_testcases(fixtures_dir):
    out = _cli("info", fixtures_dir / "convnet_testcase.mge")
    assert out.returncode == 0, out.stderr
    assert "format mgbtest0 with 1 testcase(s)" in out.stdout and "Convolution" in out.stdout
    out = _cli("run", fixtures_dir / "convnet_testcase.mge", "--testcases")
    assert out.returncode == 0 and "assert_eq(out:expect,out)[168]" in out.stdout
    assert "1 testcase(s) passed" in out.stdout


def test_run_saves_outputs(fixtures_dir, tmp_path):
    out = _cli("run", fixtures_dir / "mlp_fbs1.mge", "--input",
               f"data={fixtures_dir / 'mlp_in_b8.npy'}", "--save", tmp_path / "o.npz")
    assert out.returncode == 0, out.stderr
    got = np.load(tmp_path / "o.npz")["out"]
    want = np.load(fixtures_dir / "mlp_out_b8.npy")
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_bad_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.mge"
    bad.write_bytes(b"not a model at all")
    out = _cli("info", bad)
    assert out.returncode == 2 and out.stderr.startswith("megtrace: error: not a MegEngine model")


def test_version():
    out = _cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("megtrace 0.") and "TVM 0.27" in out.stdout


def test_info_decodes_metadata_and_weights(fixtures_dir):
    out = _cli("info", fixtures_dir / "convnet_opt.mge")
    assert out.returncode == 0, out.stderr
    assert "weights:" in out.stdout and "KiB" in out.stdout
    assert "optimize_options=" in out.stdout and "(not unpickled)" in out.stdout


def test_run_with_load_and_run_options(fixtures_dir, tmp_path):
    out = _cli("run", fixtures_dir / "convnet_plain.mge", "--input", "data:#rand(0,1)",
               "--batch_size", "4", "--iter", "3", "--warmup_iter", "2", "--thread", "1",
               "--io_dump", tmp_path / "io.txt", "--bin_out_dump", tmp_path / "outs",
               "--profile", tmp_path / "profile.json")
    assert out.returncode == 0, out.stderr
    assert "3 run(s) after 2 warm-up" in out.stdout and "kernels (one run)" in out.stdout
    assert "[4, 10]" in out.stdout                                # batch 4 from a batch-1 file
    assert np.load(tmp_path / "outs" / "out.npy").shape == (4, 10)
    assert "input data: float32[4, 3, 32, 32]" in (tmp_path / "io.txt").read_text()
    assert '"profiler"' in (tmp_path / "profile.json").read_text()


def test_float64_npy_input_and_npy_save(fixtures_dir, tmp_path):
    np.save(tmp_path / "x.npy", np.load(fixtures_dir / "mlp_in_b8.npy").astype(np.float64))
    out = _cli("run", fixtures_dir / "mlp_plain.mge", "--input", f"data:{tmp_path / 'x.npy'}",
               "--save", tmp_path / "out.npy")
    assert out.returncode == 0, out.stderr
    want = np.load(fixtures_dir / "mlp_out_b8.npy")
    got = np.load(tmp_path / "out.npy")
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert not (tmp_path / "out.npy.npz").exists()


@pytest.mark.parametrize("args,words,status", [
    (["--input", "nosuch:#rand(0,1)"], "name one of the inputs ['data']", 2),
    (["--save", "out.txt"], "expected a .npz", 2),
    (["--testcases"], "has no testcases", 1),
    (["--batch_size", "0"], "positive batch", 2),
    (["--input", "data:missing.npy"], "--input data:missing.npy: no such file", 2),
])
def test_user_mistakes_are_one_line(fixtures_dir, tmp_path, args, words, status):
    out = subprocess.run([sys.executable, "-m", "megtrace", "run",
                          str(fixtures_dir / "mlp_plain.mge"), *args], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=ENV)
    assert out.returncode == status, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert words in out.stderr


def test_missing_model_file():
    out = _cli("run", "no-such-model.mge")
    assert out.returncode == 2 and out.stderr.strip() == "megtrace: error: no-such-model.mge: no such file"


def test_a_tampered_testcase_fails_with_status_1(fixtures_dir, tmp_path):
    from megtrace.fbs.testcases import read_container
    data = (fixtures_dir / "convnet_testcase.mge").read_bytes()
    _, cases = read_container(data)
    expect = np.ascontiguousarray(cases[0]["out:expect"])
    at = data.index(expect.tobytes())
    tampered = data[:at] + (expect + 1).astype(expect.dtype).tobytes() + data[at + expect.nbytes:]
    (tmp_path / "t.mge").write_bytes(tampered)
    out = _cli("run", tmp_path / "t.mge", "--testcases")
    assert out.returncode == 1 and "testcase failed" in out.stderr and "exceeds maxerr" in out.stderr


def test_run_an_exported_library(tmp_path):
    import megtrace as mge
    from megtrace.jit import trace
    f = trace(lambda x: x * 2 + 1, symbolic=True, capture_as_const=True)
    f(mge.tensor(np.ones((2, 3), np.float32)))
    mge.export(f, tmp_path / "m.so")
    np.save(tmp_path / "x.npy", np.full((2, 3), 3, np.float32))
    out = _cli("run", tmp_path / "m.so", "--input", f"arg_0:{tmp_path / 'x.npy'}",
               "--save", tmp_path / "o.npz")
    assert out.returncode == 0, out.stderr
    assert np.array_equal(np.load(tmp_path / "o.npz")["output_0"], np.full((2, 3), 7, np.float32))
    out = _cli("run", tmp_path / "m.so", "--batch_size", "4")
    assert out.returncode == 2 and "export again" in out.stderr
