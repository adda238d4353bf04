"""trace's sublinear_memory_config and dtr_config (megtrace/jit/sublinear.py): a traced
training step computes the same losses, gradients and weights, and its compiled run's
measured peak memory drops by a large part of the activation memory."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, TESTS

from megtrace.jit import DTRConfig, SublinearMemoryConfig
from megtrace.jit.sublinear import simulated_peak
from memory_models import activation_bytes, compiled_of, training_step


@pytest.mark.parametrize("kwargs,message", [
    ({"thresh_nr_try": -1}, "thresh_nr_try must be greater or equal to zero"),
    ({"genetic_nr_iter": -1}, "genetic_nr_iter must be greater or equal to zero"),
    ({"genetic_pool_size": -1}, "genetic_pool_size must be greater or equal to zero"),
    ({"num_worker": 0}, "num_worker must be greater or equal to one"),
])
def test_sublinear_config_errors_are_megengines(kwargs, message):
    with pytest.raises(AssertionError, match=message):
        SublinearMemoryConfig(**kwargs)


@pytest.mark.parametrize("kwargs,message", [
    ({}, "eviction_threshold must be greater to zero"),
    ({"eviction_threshold": 1, "evictee_minimum_size": -1},
     "evictee_minimum_size must be greater or equal to zero"),
    ({"eviction_threshold": 1, "recomp_memory_factor": -1},
     "recomp_memory_factor must be greater or equal to zero"),
    ({"eviction_threshold": 1, "recomp_time_factor": -1},
     "recomp_time_factor must be greater or equal to zero"),
])
def test_dtr_config_errors_are_megengines(kwargs, message):
    with pytest.raises(AssertionError, match=message):
        DTRConfig(**kwargs)


def test_config_defaults_are_megengines():
    c = SublinearMemoryConfig()
    assert (c.thresh_nr_try, c.genetic_nr_iter, c.genetic_pool_size, c.lb_memory_mb) == \
        (10, 0, 20, 0) and c.num_worker >= 1
    d = DTRConfig(eviction_threshold=5)
    assert (d.evictee_minimum_size, d.recomp_memory_factor, d.recomp_time_factor) == \
        (1 << 20, 1, 1)


def _run(steps=2, **options):
    step, net, x, label = training_step(**options)
    losses, grads = [], []
    for _ in range(steps):
        loss, *g = step(x, label)
        losses.append(float(loss))
        grads.append([t.numpy() for t in g])
    return step, losses, grads, [p.numpy() for p in net.parameters()]


OPTIONS = {
    "sublinear": {"sublinear_memory_config": SublinearMemoryConfig()},
    "sublinear-genetic": {"sublinear_memory_config": SublinearMemoryConfig(
        thresh_nr_try=3, genetic_nr_iter=4, genetic_pool_size=6)},
    "dtr": {"dtr_config": DTRConfig(eviction_threshold=4 << 20,
                                    evictee_minimum_size=1 << 16)},
}


@pytest.fixture(scope="module")
def plain_run():
    return _run()


@pytest.mark.parametrize("name", list(OPTIONS))
def test_memory_option_keeps_losses_and_gradients(plain_run, name):
    _, losses0, grads0, final0 = plain_run
    step, losses, grads, final = _run(**OPTIONS[name])
    graph, _ = compiled_of(step)
    assert any(v.name_hint.endswith(":recompute") for n in graph.nodes for v in n.outputs)
    np.testing.assert_allclose(losses, losses0, rtol=0, atol=1e-6)
    for g, g0 in zip(grads, grads0):
        for a, b in zip(g, g0):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    for a, b in zip(final, final0):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_lower_bound_trades_memory_for_less_recomputation(plain_run):
    """lb_memory_mb: a peak below the bound is not worth more recomputation."""
    plain_peak = simulated_peak(compiled_of(plain_run[0])[0])
    low, _, _, _ = _run(steps=1, sublinear_memory_config=SublinearMemoryConfig())
    low_peak = simulated_peak(compiled_of(low)[0])
    assert low_peak < 0.7 * plain_peak
    bound_mb = ((plain_peak + low_peak) // 2) >> 20
    high, _, _, _ = _run(steps=1, sublinear_memory_config=SublinearMemoryConfig(
        lb_memory_mb=bound_mb))
    high_peak = simulated_peak(compiled_of(high)[0])
    assert bound_mb << 20 <= high_peak < plain_peak
    copies = [sum(v.name_hint.endswith(":recompute") for n in compiled_of(s)[0].nodes
                  for v in n.outputs) for s in (low, high)]
    assert copies[1] < copies[0]


_MEASURE = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from megtrace.jit import DTRConfig, SublinearMemoryConfig
from megtrace.relay_bridge.memory import peak_run_bytes
from memory_models import compiled_of, training_step
options = {"plain": {}, "sublinear": {"sublinear_memory_config": SublinearMemoryConfig()},
           "dtr": {"dtr_config": DTRConfig(eviction_threshold=4 << 20,
                                           evictee_minimum_size=1 << 16)}}
out = {}
for name, kw in options.items():
    step, net, x, label = training_step(**kw)
    step(x, label)
    graph, compiled = compiled_of(step)
    arrays = [np.zeros(v.type.shape, v.type.dtype) for v in graph.inputs]
    out[name] = min(peak_run_bytes(compiled, arrays) for _ in range(2))
print(json.dumps(out))
"""


def test_memory_options_lower_measured_peak():
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(TESTS)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    peak = json.loads(done.stdout.strip().splitlines()[-1])
    acts = activation_bytes()
    assert peak["plain"] >= acts        # the model is activation-dominated
    for name in ("sublinear", "dtr"):
        assert peak["plain"] - peak[name] >= 0.3 * acts, (name, peak)
