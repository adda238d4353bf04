"""Run in a subprocess by test_threads.py (so a crash fails the test instead of killing
pytest): one traced function (replaying and without_host), one loaded graph and one
exported model, each called from THREADS threads, CALLS calls per thread, every result
compared with the serial call on the same input. Prints one JSON line."""
import json
import os
import sys
import threading

import numpy as np
import psutil

import megtrace as mge
from megtrace.demo import Net
from megtrace.jit import trace

THREADS, CALLS, WORK = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
net = Net()
net.eval()
rng = np.random.default_rng(0)
inputs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(THREADS)]


def traced(without_host: bool):
    @trace(symbolic=True, capture_as_const=True, without_host=without_host)
    def infer(x):
        return net(x)
    return lambda x: infer(mge.tensor(x)).numpy()


def loaded():
    path = os.path.join(WORK, "net.mge")
    infer = trace(lambda x: net(x), symbolic=True, capture_as_const=True)
    infer(mge.tensor(inputs[0]))
    infer.dump(path, arg_names=["data"], output_names=["out"])
    model = mge.load_graph(path)
    return lambda x: model.run(data=x)["out"]


def exported():
    infer = trace(lambda x: net(x), symbolic=True, capture_as_const=True)
    infer(mge.tensor(inputs[0]))
    path = os.path.join(WORK, "net.so")
    mge.export(infer, path)
    model = mge.load_exported(path)
    return lambda x: model(x)[0]


def hammer(call) -> dict:
    want = [call(x) for x in inputs]
    wrong, errors = [], []

    def work(i):
        for k in range(CALLS):
            j = (i + k) % THREADS
            try:
                got = call(inputs[j])
            except Exception as e:          # noqa: BLE001 - reported, the test fails
                errors.append(f"{type(e).__name__}: {e}"[:200])
                continue
            if not np.array_equal(got, want[j]):
                wrong.append((i, k))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"calls": THREADS * CALLS, "wrong": len(wrong), "errors": errors[:3],
            "n_errors": len(errors)}


def rss_growth(call, calls: int) -> float:
    """MB the process grows over the second half of `calls` serial calls."""
    proc = psutil.Process()
    for _ in range(calls // 2):
        call(inputs[0])
    before = proc.memory_info().rss
    for _ in range(calls // 2):
        call(inputs[0])
    return (proc.memory_info().rss - before) / 2**20


results = {name: hammer(make()) for name, make in (
    ("replay", lambda: traced(False)), ("without_host", lambda: traced(True)),
    ("loaded", loaded), ("exported", exported))}
results["rss_growth_mb"] = rss_growth(traced(True), int(sys.argv[4]))
print(json.dumps(results))
