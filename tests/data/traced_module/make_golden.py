"""Golden data from real MegEngine 1.13: the graph names trace_module gives a small model.

Run with real MegEngine: /work/shared/megref/mpy tests/data/traced_module/make_golden.py OUT.json
"""
import json
import sys

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.traced_module import trace_module


class Block(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(4, 4, 3, padding=1)
        self.bn = M.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))) + x


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.stem = M.Conv2d(3, 4, 3, padding=1)
        self.block = Block()
        self.fc = M.Linear(4, 10)

    def forward(self, x, scale=2.0):
        x = self.stem(x)
        x = self.block(x)
        x = self.block(x)          # the same submodule twice
        x = F.flatten(F.adaptive_avg_pool2d(x, 1), 1) * scale
        return self.fc(x)


def describe(graph):
    return {"name": graph.name,
            "inputs": [n.name for n in graph.inputs],
            "outputs": [n.name for n in graph.outputs],
            "exprs": [type(e).__name__ for e in graph.exprs(False)],
            "nodes": [n.name for n in graph.nodes(False)],
            "qualnames": [n.qualname for n in graph.nodes(False)]}


net = Net()
net.eval()
tm = trace_module(net, mge.tensor(np.zeros((1, 3, 8, 8), "float32")))
out = {"top": describe(tm.graph), "block": describe(tm.block.graph),
       "modules": [name for name, _ in tm.named_modules()],
       "flat": describe(tm.flatten().graph)}
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
