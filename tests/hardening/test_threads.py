"""Concurrent calls: one traced function, one loaded graph and one exported model called
from 8 threads give exactly the serial results, and a long loop keeps memory flat. The
calls run in a subprocess so that a crash (TVM's VM is not reentrant) fails the test."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("threaded_calls.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_eight_threads_get_the_serial_results(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "8", "1000", str(tmp_path), "10000"],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TVM_NUM_THREADS": "1",
                               "PYTHONPATH": os.pathsep.join(
                                   [str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, f"the threaded process died ({proc.returncode}):\n" \
                                 f"{proc.stderr[-3000:]}"
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for mode in ("replay", "without_host", "loaded", "exported"):
        r = results[mode]
        assert r["calls"] == 8000
        assert r["n_errors"] == 0, (mode, r["errors"])
        assert r["wrong"] == 0, mode
    assert results["rss_growth_mb"] < 20, results["rss_growth_mb"]
