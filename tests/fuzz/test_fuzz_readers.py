"""Fuzzing in the suite: every crash input ever found is replayed (tests/fuzz/crashes/
<target>/), and each reader gets a short coverage-guided atheris run (a longer one is
`python tests/fuzz/fuzz_readers.py TARGET -max_total_time=...`)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.targets import check_one, targets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CRASHES = HERE / "crashes"
TARGETS = targets()


def _crash_inputs():
    for folder in sorted(p for p in CRASHES.iterdir() if p.is_dir()):
        for path in sorted(p for p in folder.iterdir() if not p.name.startswith(".")):
            yield pytest.param(folder.name, path, id=f"{folder.name}/{path.name}")


def test_every_crash_folder_names_a_target():
    assert {p.name for p in CRASHES.iterdir() if p.is_dir()} <= set(TARGETS)


@pytest.mark.parametrize("target,path", list(_crash_inputs()))
def test_crash_inputs_stay_fixed(target, path):
    check_one(TARGETS[target], path.read_bytes())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_short_fuzz_run_finds_nothing(name, tmp_path):
    seconds = int(os.environ.get("MEGTRACE_FUZZ_SECONDS", "10"))
    env = {**os.environ, "TVM_NUM_THREADS": "1", "MEGTRACE_FUZZ_SEEDS": str(tmp_path / "corpus"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(HERE / "fuzz_readers.py"), name, f"-max_total_time={seconds}",
         f"-artifact_prefix={tmp_path}/", "-rss_limit_mb=2048", "-timeout=10"],
        capture_output=True, text=True, timeout=seconds + 300, env=env)
    tail = proc.stderr[-4000:]
    assert proc.returncode == 0, f"the fuzzer found a failing input for {name}:\n{tail}"
    done = re.search(r"#(\d+)\s+DONE\s+cov: (\d+)", proc.stderr)
    assert done, tail
    assert int(done.group(1)) > 50 and int(done.group(2)) > 10, done.group(0)
