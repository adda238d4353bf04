"""Measuring through an RPC tracker: a tracker and a server on loopback, started here,
and a tuning run of one trial per task measured through them."""
import json
import os
import time

import numpy as np
import pytest
from models import MLP

from megtrace.relay_bridge.ms_env import RemoteDevice
from megtrace.relay_bridge.tuning import tune

from .helpers import traced

pytestmark = pytest.mark.slow

KEY = "megtrace-loopback"


@pytest.fixture
def tracker():
    from tvm import rpc
    from tvm.rpc.server import Server
    from tvm.rpc.tracker import Tracker
    tr = Tracker("127.0.0.1", port=9190, port_end=9290, silent=True)
    old = os.environ.get("TVM_NUM_THREADS")
    os.environ["TVM_NUM_THREADS"] = "1"           # the "device" runs with 1 thread
    try:
        server = Server("127.0.0.1", port=9300, port_end=9400, key=KEY, silent=True,
                        tracker_addr=("127.0.0.1", tr.port))
    finally:
        if old is None:
            os.environ.pop("TVM_NUM_THREADS")
        else:
            os.environ["TVM_NUM_THREADS"] = old
    try:
        deadline = time.monotonic() + 20
        while KEY not in rpc.connect_tracker("127.0.0.1", tr.port).summary()["queue_info"]:
            assert time.monotonic() < deadline, "the RPC server never registered"
            time.sleep(0.2)
        yield tr.port
    finally:
        server.terminate()
        tr.terminate()


def test_tuning_measures_through_the_tracker(tracker, tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    f = traced(MLP().eval(), x)
    summary = tune(f, work_dir=tmp_path, trials=1, num_threads=1, base="default",
                   remote=RemoteDevice("127.0.0.1", tracker, KEY), progress=False)
    assert summary.total_trials == 3
    assert summary.tuned_ms is None                 # no whole-model timing over RPC
    path = tmp_path / summary.target_key / "database_tuning_record.json"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(records) == 3 and all(0 < min(r[1][1]) < 1.0 for r in records)
    assert all(t.best_us is not None for t in summary.tasks)    # measured remotely
    assert all(t.untuned_us is not None for t in summary.tasks)  # re-measured remotely


def test_remote_device_checks_its_fields():
    with pytest.raises(ValueError, match="tracker_port"):
        RemoteDevice("127.0.0.1", 0, KEY)
    with pytest.raises(ValueError, match="key"):
        RemoteDevice("127.0.0.1", 9190, "")
    with pytest.raises(ValueError, match="tracker_host"):
        RemoteDevice("", 9190, KEY)
