"""The `megtrace` command line on MegEngine's own files."""
import subprocess
import sys

import numpy as np


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "megtrace.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_info_and_testcases(fixtures_dir):
    out = _cli("info", fixtures_dir / "convnet_testcase.mge")
    assert out.returncode == 0, out.stderr
    assert "format mgbtest0 with 1 testcase(s)" in out.stdout and "Convolution" in out.stdout
    out = _cli("run", fixtures_dir / "convnet_testcase.mge", "--testcases")
    assert out.returncode == 0 and "testcase 0: assert_eq(out:expect,out)[168] err=" in out.stdout


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
