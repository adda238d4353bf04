"""`megtrace export`, `convert`, `bench` and `tune` on real files (MegEngine's fixtures
and our dumps), each run as a user would: a subprocess, one clear line on a mistake."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
       "COLUMNS": "200"}


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "megtrace", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env or ENV)


def _one_line_error(out, status, words):
    assert out.returncode == status, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert words in out.stderr, out.stderr


def _close(got, want):
    return np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())


def test_convert_to_fbs_optimized_runs_in_lite(fixtures_dir, tmp_path, lite):
    out = _cli("convert", fixtures_dir / "convnet_plain.mge", tmp_path / "c.mge",
               "--format", "FBS", "--optimize-for-inference", "--strip-info",
               tmp_path / "strip.json")
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stdout and "FBS" in out.stdout
    info = _cli("info", tmp_path / "c.mge")
    assert "format FBS (MGBC)" in info.stdout and "optimize_options=" in info.stdout
    assert "BatchNorm" not in info.stdout          # folded into the convolutions
    assert "opr_types" in json.loads((tmp_path / "strip.json").read_text())
    x = np.load(fixtures_dir / "convnet_in_b1.npy")
    want = np.load(fixtures_dir / "convnet_out_b1.npy")
    got = lite.run_model(tmp_path / "c.mge", {"data": x})
    assert _close(next(iter(got.values())), want)


def test_convert_keeps_testcases_and_back_to_fbs_v2(fixtures_dir, tmp_path):
    out = _cli("convert", fixtures_dir / "convnet_testcase.mge", tmp_path / "t.mge",
               "--keep-var-name", "2")
    assert out.returncode == 0 and "1 testcase(s) kept" in out.stdout, out.stderr
    run = _cli("run", tmp_path / "t.mge", "--testcases")
    assert run.returncode == 0 and "1 testcase(s) passed" in run.stdout, run.stderr
    out = _cli("convert", fixtures_dir / "mlp_fbs1.mge", tmp_path / "v2.mge", "--compat",
               "8.14", "--format", "FBS")
    assert out.returncode == 0, out.stderr
    run = _cli("run", tmp_path / "v2.mge", "--input",
               f"data:{fixtures_dir / 'mlp_in_b8.npy'}", "--save", tmp_path / "o.npz")
    assert run.returncode == 0, run.stderr
    assert _close(np.load(tmp_path / "o.npz")["out"], np.load(fixtures_dir / "mlp_out_b8.npy"))


@pytest.mark.parametrize("args,words", [
    (["--compat", "8.14"], "--compat 8.14 needs --format FBS"),
    (["--fuse-conv-bias-nonlinearity"], "goes with --optimize-for-inference"),
    (["--format", "FBS3"], "invalid choice"),
])
def test_convert_mistakes_are_one_line(fixtures_dir, tmp_path, args, words):
    out = _cli("convert", fixtures_dir / "mlp_plain.mge", tmp_path / "o.mge", *args)
    _one_line_error(out, 2, words)
    assert not (tmp_path / "o.mge").exists()


def test_export_a_model_file_then_run_it(fixtures_dir, tmp_path):
    out = _cli("export", fixtures_dir / "mlp_plain.mge", tmp_path / "m.so", "--threads", "1")
    assert out.returncode == 0, out.stderr
    assert "exported" in out.stdout and (tmp_path / "m.so.json").exists()
    manifest = json.loads((tmp_path / "m.so.json").read_text())
    assert [i["name"] for i in manifest["inputs"]] == ["data"]
    run = _cli("run", tmp_path / "m.so", "--input", f"data:{fixtures_dir / 'mlp_in_b1.npy'}",
               "--save", tmp_path / "o.npz")
    assert run.returncode == 0, run.stderr
    assert _close(np.load(tmp_path / "o.npz")["out"], np.load(fixtures_dir / "mlp_out_b1.npy"))


@pytest.mark.parametrize("args,words", [
    (["m.txt"], "path: expected a library name ending in .so or .tar"),
    (["m.so", "--threads", "0"], "--threads: expected a positive count"),
    (["m.so", "--target", "{bad"], "--target: not a JSON target"),
    (["m.so", "--tuning-dir", "nowhere"], "--tuning-dir nowhere: no such folder"),
])
def test_export_mistakes_are_one_line(fixtures_dir, tmp_path, args, words):
    out = _cli("export", fixtures_dir / "mlp_plain.mge", *args)
    _one_line_error(out, 2, words)


def test_bench_against_lite(fixtures_dir, lite):
    out = _cli("bench", fixtures_dir / "convnet_plain.mge", "--iter", "3", "--thread", "1")
    assert out.returncode == 0, out.stderr
    assert "megtrace (TVM)" in out.stdout and "MegEngine Lite 1.13.0" in out.stdout
    error = float(out.stdout.split("max |megtrace - Lite|: ")[1].split()[0])
    assert error < 1e-4


def test_bench_without_lite_says_so(fixtures_dir, tmp_path):
    env = {**ENV, "MEGTRACE_LITE_CACHE": str(tmp_path / "no-lite")}
    out = _cli("bench", fixtures_dir / "mlp_plain.mge", "--iter", "2", env=env)
    assert out.returncode == 0, out.stderr
    assert "MegEngine Lite: not prepared" in out.stdout and "megtrace (TVM)" in out.stdout
    _one_line_error(_cli("bench", fixtures_dir / "mlp_plain.mge", "--iter", "0"), 2,
                    "--iter: expected a count >= 1")
    _one_line_error(_cli("bench", fixtures_dir / "mlp_plain.mge", "--lite-dir", tmp_path), 2,
                    "no megenginelite/ in it")


def test_tune_help_and_mistakes(tmp_path, fixtures_dir):
    out = _cli("tune", "--help")
    assert out.returncode == 0 and out.stdout.startswith("usage: megtrace tune ")
    assert "megtrace-tune" not in out.stdout
    out = _cli("tune", tmp_path / "missing.mge", "--work-dir", tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("megtrace tune: error:")
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


def test_every_command_is_listed():
    out = _cli("--help")
    for cmd in ("info", "run", "tune", "export", "convert", "bench", "demo"):
        assert cmd in out.stdout
