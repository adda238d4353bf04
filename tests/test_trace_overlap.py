"""The compiled run beside the replay (megtrace/jit/overlap.py): same results, the same
MegEngine errors, the run's own errors still raised, and only where the graph's inputs
are all known before the Python runs."""
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import megtrace as mge
import megtrace.module as M
from megtrace.jit import TraceError, overlap, trace
from megtrace.relay_bridge._tvm import tvm


@pytest.fixture
def starts(monkeypatch):
    """Overlap forced on; counts the runs started on the worker."""
    count = []
    real = overlap.start

    def counting(run, *args):
        count.append(1)
        return real(run, *args)
    monkeypatch.setattr(overlap, "enabled", True)
    monkeypatch.setattr(overlap, "start", counting)
    return count


CASES = [
    ("a + b + c", "a + b - c", "operator mismatch"),
    ("a + b + 1", "a + b + 2", "tensors not equals"),
    ("(a + b, b + c)[0]", "a + b", "mismature end"),
    ("a + b + c", "a + b + c + c", "too many instructions"),
    ("(a + b, b + c)[1]", "(a + b, b + c)[0]", "data unreadable"),
]


@pytest.mark.parametrize("traced, replayed, reason", CASES)
def test_replays_beside_the_run_keep_megengines_errors(starts, traced, replayed, reason):
    state = {"expr": traced}

    @trace(symbolic=True)
    def fn(a, b, c):
        return eval(state["expr"])

    a, b, c = mge.tensor([1, 2, 3, 4]), mge.tensor([5, 6, 7, 8]), mge.tensor([9, 0, 1, 2])
    want = eval(traced).numpy()
    np.testing.assert_equal(fn(a, b, c).numpy(), want)
    np.testing.assert_equal(fn(a, b, c).numpy(), want)
    assert len(starts) == 1                  # the replay, not the tracing call
    state["expr"] = replayed
    with pytest.raises(TraceError) as info:
        fn(a, b, c)
    assert str(info.value) == f"trace error because {reason}"
    state["expr"] = traced
    np.testing.assert_equal(fn(a, b, c).numpy(), want)


def test_a_module_replays_beside_the_run_with_new_inputs(starts, rng):
    net = M.Sequential(M.Linear(5, 4), M.ReLU(), M.Linear(4, 3))

    @trace(symbolic=True, capture_as_const=True)
    def fn(x):
        return net(x)

    for _ in range(3):
        x = rng.standard_normal((2, 5)).astype(np.float32)
        np.testing.assert_allclose(fn(mge.tensor(x)).numpy(), net(mge.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert len(starts) == 2


def test_an_error_of_the_run_itself_is_raised(starts, monkeypatch):
    @trace(symbolic=True)
    def fn(x):
        return x * 2 + 1

    x = mge.tensor([1.0, 2.0])
    fn(x)
    _, compiled = fn._last_entry.compiled

    def broken(*arrays):
        def run():
            raise RuntimeError("kernel failed")
        return run
    monkeypatch.setattr(compiled, "prepare", broken)
    with pytest.raises(RuntimeError, match="kernel failed"):
        fn(x)
    assert len(starts) == 1


def test_a_replay_that_feeds_other_values_drops_the_run_started_beside_it(starts):
    """MegEngine feeds a traced input whatever outside value the replay gives there (the
    other argument, a global): the run started on the arguments as traced is then
    dropped and the graph runs on the values this call fed."""
    state = {"swap": 0}
    other = mge.tensor([100.0, 200.0])

    @trace(symbolic=True)
    def fn(a, b):
        return a - b if not state["swap"] else (b if state["swap"] == 1 else other) - a

    a, b = mge.tensor([1.0, 2.0]), mge.tensor([10.0, 20.0])
    np.testing.assert_equal(fn(a, b).numpy(), [-9.0, -18.0])
    np.testing.assert_equal(fn(a, b).numpy(), [-9.0, -18.0])
    state["swap"] = 1
    np.testing.assert_equal(fn(a, b).numpy(), [9.0, 18.0])
    state["swap"] = 2
    np.testing.assert_equal(fn(a, b).numpy(), [99.0, 198.0])
    state["swap"] = 0
    np.testing.assert_equal(fn(a, b).numpy(), [-9.0, -18.0])
    assert len(starts) == 4                  # every replay started one


def test_graphs_reading_outside_tensors_replay_first(starts):
    """Without capture_as_const a parameter is an input the replay feeds: no overlap,
    and a changed parameter is read as it is now."""
    net = M.Linear(3, 2)

    @trace(symbolic=True)
    def fn(x):
        return net(x)

    x = mge.tensor(np.ones((1, 3), np.float32))
    fn(x)
    net.bias[...] = net.bias + 1
    np.testing.assert_allclose(fn(x).numpy(), net(x).numpy(), rtol=1e-6)
    assert starts == []


@pytest.mark.parametrize("value, threads, cores, want", [
    ("1", "4", 4, True), ("0", "1", 4, False), ("", "1", 4, True), ("", "4", 4, False),
    ("auto", "1", 2, True), ("auto", "2", 2, False), (None, "1", 2, True),
    (None, "2", 2, False)])
def test_when_it_is_wanted(monkeypatch, value, threads, cores, want):
    monkeypatch.setattr(overlap, "enabled", None)
    if value is None:
        monkeypatch.delenv(overlap.ENV, raising=False)
    else:
        monkeypatch.setenv(overlap.ENV, value)
    monkeypatch.setenv("TVM_NUM_THREADS", threads)
    monkeypatch.setattr(overlap, "_cores", lambda: cores)
    assert overlap.wanted() is want


def test_the_run_hands_its_inputs_to_tvm_before_the_worker_starts(monkeypatch, rng):
    """The worker's first TVM call must be the kernels' (each call releases the GIL, and
    the replaying thread would then keep it for its whole replay): the inputs become TVM
    tensors on the thread that prepares the run (CompiledGraph.prepare), and the run on
    another thread only calls the VM."""
    net = M.Linear(5, 3)
    fn = trace(lambda x: net(x), symbolic=True, capture_as_const=True)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    fn(mge.tensor(x))
    want = x @ net.weight.numpy().T + net.bias.numpy()      # NumPy's Linear
    _, compiled = fn._last_entry.compiled
    runtime, converted_on = tvm().runtime, []
    real = runtime.from_dlpack

    def from_dlpack(array):
        converted_on.append(threading.get_ident())
        return real(array)
    monkeypatch.setattr(runtime, "from_dlpack", from_dlpack)
    run = compiled.prepare(x)
    assert converted_on == [threading.get_ident()]
    with ThreadPoolExecutor(1) as pool:
        (got,) = pool.submit(run).result()
    assert converted_on == [threading.get_ident()]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_replays_beside_its_own_worker(starts):
    """A child forked after a run beside the replay (a multiprocessing worker, a data
    loader) has none of the parent's threads: it must start its own worker, not queue
    the run on the parent's dead one and wait forever."""
    @trace(symbolic=True)
    def fn(x):
        return x * 2 + 1

    x = mge.tensor(np.array([1.0, 2.0], np.float32))
    fn(x)
    fn(x)
    assert len(starts) == 1
    pid = os.fork()
    if pid == 0:                        # the child: exit 0 only with the right values
        ok = np.array_equal(fn(x).numpy(), [3.0, 5.0])
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's replay did not finish in 60 s")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
