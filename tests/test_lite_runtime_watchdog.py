"""tests/lite_runtime.run_models: a model Lite hangs on, or dies on, fails only its own
jobs; the models after it run in a fresh process; a slow model that keeps computing is
waited for. A stand-in runner (no Lite needed) blocks on files named *hang*, computes for
a while on *busy*, dies by SIGSEGV on *crash*, refuses *refuse* and otherwise writes twice
the input as the output, as tests/lite_runner.py's --batch protocol does."""
from __future__ import annotations

import numpy as np

import lite_runtime          # tests/ is on the path (conftest.py)

FAKE_RUNNER = '''
import json, os, signal, sys, time
import numpy as np
jobs = json.load(open(sys.argv[3]))
for model, inputs, outputs in jobs:
    name = os.path.basename(model)
    if "hang" in name:
        print("bad err=45 in Xbyak::Error", file=sys.stderr, flush=True)
        time.sleep(600)
    if "busy" in name:
        until = time.process_time() + 3
        while time.process_time() < until:
            pass
    if "crash" in name:
        os.kill(os.getpid(), signal.SIGSEGV)
    if "refuse" in name:
        open(outputs + ".error", "w").write("RuntimeError: refused")
        continue
    with open(outputs + ".part", "wb") as f:
        np.savez(f, y=np.load(inputs)["x"] * 2)
    os.replace(outputs + ".part", outputs)
'''


def test_a_hang_and_a_crash_fail_only_their_own_jobs(tmp_path, monkeypatch):
    runner = tmp_path / "runner.py"
    runner.write_text(FAKE_RUNNER)
    monkeypatch.setattr(lite_runtime, "RUNNER", runner)
    monkeypatch.setattr(lite_runtime, "is_prepared", lambda: True)
    names = ["a", "hang", "hang", "b", "refuse", "crash", "c", "busy"]  # "hang" twice: one
    jobs = [(tmp_path / f"{n}.mge", {"x": np.full(2, i, np.float32)})  # file, two batches
            for i, n in enumerate(names)]
    got = lite_runtime.run_models(jobs, timeout=60, stall=1.5)
    for i in (0, 3, 6, 7):
        np.testing.assert_array_equal(got[i]["y"], np.full(2, 2 * i, np.float32))
    for i in (1, 2):
        assert got[i].startswith("not run: Lite made no progress") and "Xbyak" in got[i]
    assert got[4] == "RuntimeError: refused"
    assert got[5].startswith("not run: Lite exited with -11")
