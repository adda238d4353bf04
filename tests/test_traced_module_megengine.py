"""traced_module against real MegEngine 1.13's (golden data made by
tests/data/traced_module/make_megengine_tm.py): what graph queries find and how exprs
print for the same net, and TracedModules that MegEngine pickled (.tm files) loading,
running and being edited here."""
import json
import pathlib

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.traced_module import trace_module

DATA = pathlib.Path(__file__).parent / "data" / "traced_module"
FACTS = json.loads((DATA / "megengine_facts.json").read_text())
IO = np.load(DATA / "megengine_net_io.npz")


class Block(M.Module):          # also in data/traced_module/make_megengine_tm.py
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 4, 3, padding=1)
        self.bn = M.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Net(M.Module):            # also in data/traced_module/make_megengine_tm.py
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.pool = M.MaxPool2d(2)
        self.fc = M.Linear(16, 5)
        self.fc2 = M.Linear(5, 5, bias=False)

    def forward(self, x, scale=2.0):
        x = self.pool(self.block(x))
        x = F.flatten(F.adaptive_avg_pool2d(x, 2), 1)
        y = self.fc(x)
        y = F.sigmoid(y) * scale + F.clip(y, -1.0, 1.0)
        s = y.sum(axis=1, keepdims=True)
        m = y.mean()
        z = F.matmul(y, y.transpose(1, 0))
        z = F.expand_dims(z.max(axis=0), 0).reshape(-1, 1)
        w = self.fc2(y).flatten() + m
        return F.concat([y, s * 2, z], axis=1), w.reshape(2, 5)


@pytest.fixture(scope="module")
def traced():
    net = Net()
    net.eval()
    return trace_module(net, mge.tensor(IO["x"]))


def test_get_method_by_type_call_finds_every_module_call(traced):
    graph = traced.graph
    assert [str(e) for e in graph.get_method_by_type("__call__").as_list()] == \
        FACTS["call_methods"]
    assert graph.get_method_by_type().as_count() == len(FACTS["all_methods"])
    assert [str(e).split("=")[0] for e in graph.get_method_by_type().as_list()] == \
        [line.split("=")[0] for line in FACTS["all_methods"]]
