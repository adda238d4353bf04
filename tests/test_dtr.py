"""`megtrace.dtr`: MegEngine's eager dynamic tensor rematerialization. Evicted values
come back equal when read, training computes the same losses and weights, and the
NumPy memory a training step holds at its peak drops well below the activations'."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, TESTS

import megtrace as mge
import megtrace.functional as F
from megtrace.dtr.pool import POOL, EvictedTensor
from memory_models import activation_bytes


@pytest.fixture
def dtr():
    saved = (mge.dtr.eviction_threshold, mge.dtr.evictee_minimum_size,
             mge.dtr.enable_sqrt_sampling)
    yield mge.dtr
    mge.dtr.disable()
    (mge.dtr.eviction_threshold, mge.dtr.evictee_minimum_size,
     mge.dtr.enable_sqrt_sampling) = saved


def test_settings_take_megengine_units(dtr):
    assert dtr.eviction_threshold == 0 and dtr.evictee_minimum_size == 1 << 20
    dtr.eviction_threshold = "2GB"
    assert dtr.eviction_threshold == 2 << 30
    dtr.evictee_minimum_size = "1.5 kb"
    assert dtr.evictee_minimum_size == 1536
    dtr.evictee_minimum_size = 100
    assert dtr.evictee_minimum_size == 100
    with pytest.raises(TypeError, match="`value` should be a str or an int"):
        dtr.eviction_threshold = 1.5
    with pytest.raises(ValueError, match="only supports bytes"):
        dtr.eviction_threshold = "2 TB"
    dtr.enable_sqrt_sampling = True
    assert dtr.enable_sqrt_sampling is True


def test_evicted_values_are_recomputed_when_read(dtr):
    dtr.evictee_minimum_size = 1024
    dtr.eviction_threshold = 5000            # room for one 4 KB value
    dtr.enable()
    x = mge.tensor(np.linspace(-1, 1, 1024, dtype="float32"))
    a = F.exp(x)
    b = a * 2
    c = F.sin(b)                             # a and b evicted by now
    assert type(a) is EvictedTensor and POOL.evictions >= 2
    want_a = np.exp(np.linspace(-1, 1, 1024, dtype="float32"))
    np.testing.assert_allclose(c.numpy(), np.sin(want_a * 2), rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), want_a * 2, rtol=1e-6)   # b recomputes a
    assert type(b) is mge.Tensor
    a += 1                                   # an evicted tensor given a new value
    np.testing.assert_allclose(a.numpy(), want_a + 1, rtol=1e-6)


def test_disable_stops_eviction(dtr):
    dtr.evictee_minimum_size = 1024
    dtr.eviction_threshold = 5000
    dtr.enable()
    dtr.disable()
    x = mge.tensor(np.ones(1024, "float32"))
    ys = [x * i for i in range(4)]
    assert all(type(y) is mge.Tensor for y in ys)


_TRAIN = r"""
import json, sys, tracemalloc
import numpy as np
sys.path.insert(0, sys.argv[1])
import megtrace as mge, megtrace.functional as F, megtrace.optimizer as optim
from megtrace.autodiff import GradManager
from megtrace.dtr.pool import POOL
from memory_models import BATCH, WIDTH, DeepMLP
rs = np.random.RandomState(1)
net = DeepMLP()
for p in net.parameters():
    p._set_value(rs.standard_normal(p.shape).astype("float32") * 0.1)
gm = GradManager().attach(net.parameters())
opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
x = mge.tensor(rs.standard_normal((BATCH, WIDTH)).astype("float32"))
label = mge.tensor(rs.randint(0, 10, BATCH).astype("int32"))
if sys.argv[2] != "0":
    mge.dtr.eviction_threshold = int(sys.argv[2])
    mge.dtr.evictee_minimum_size = 1 << 16
    mge.dtr.enable()
tracemalloc.start()
losses, peaks = [], []
for _ in range(3):
    tracemalloc.reset_peak()
    with gm:
        loss = F.nn.cross_entropy(net(x), label)
        gm.backward(loss)
    opt.step().clear_grad()
    losses.append(float(loss))
    peaks.append(tracemalloc.get_traced_memory()[1])
print(json.dumps({"losses": losses, "peak": max(peaks), "recomputed": POOL.recomputations,
                  "weights": [p.numpy().tolist() for p in net.parameters()][-2:]}))
"""


def _train(threshold: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _TRAIN, str(TESTS), str(threshold)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_training_with_dtr_is_unchanged_and_holds_less_memory():
    acts = activation_bytes()
    plain = _train(0)
    dtr = _train(acts)
    assert plain["recomputed"] == 0 and dtr["recomputed"] > 0
    assert dtr["losses"] == plain["losses"]
    assert dtr["weights"] == plain["weights"]
    assert plain["peak"] >= acts
    assert plain["peak"] - dtr["peak"] >= 0.3 * acts, (plain["peak"], dtr["peak"])
