"""Golden data from real MegEngine 1.13 for megtrace's traced_module: a TracedModule
pickled by MegEngine (megengine_net.tm) with its input and output (megengine_net_io.npz),
and facts about its graphs (megengine_facts.json: the printed graph, what
get_method_by_type finds, how Tensor-method and function arguments are stored, the module
path of every megengine.functional function).

Run with real MegEngine, in this folder:
    /work/shared/megref/mpy make_megengine_tm.py
"""
import inspect
import json

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.traced_module import trace_module


class Block(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 4, 3, padding=1)
        self.bn = M.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.pool = M.MaxPool2d(2)
        self.fc = M.Linear(16, 5)
        self.fc2 = M.Linear(5, 5, bias=False)

    def forward(self, x, scale=2.0):
        x = self.pool(self.block(x))                       # (2, 4, 4, 4)
        x = F.flatten(F.adaptive_avg_pool2d(x, 2), 1)      # (2, 16)
        y = self.fc(x)
        y = F.sigmoid(y) * scale + F.clip(y, -1.0, 1.0)
        s = y.sum(axis=1, keepdims=True)
        m = y.mean()
        z = F.matmul(y, y.transpose(1, 0))                 # (2, 2)
        z = F.expand_dims(z.max(axis=0), 0).reshape(-1, 1)
        w = self.fc2(y).flatten() + m
        return F.concat([y, s * 2, z], axis=1), w.reshape(2, 5)


def graph_lines(graph):
    return [str(e) for e in graph.exprs(False)]


np.random.seed(0)
net = Net()
for bn in [net.block.bn]:
    bn.running_mean[...] = np.random.rand(1, 4, 1, 1).astype("float32")
    bn.running_var[...] = np.random.rand(1, 4, 1, 1).astype("float32") + 0.5
net.eval()
x = mge.tensor(np.random.rand(2, 3, 8, 8).astype("float32"))
tm = trace_module(net, x)
y0, y1 = tm(x)
mge.save(tm, "megengine_net.tm")
np.savez("megengine_net_io.npz", x=x.numpy(), y0=y0.numpy(), y1=y1.numpy())

graph = tm.graph
sums = graph.get_method_by_type("sum").as_list()
functional = {}          # F.name's module, then names only the submodules export
for space in [F] + [getattr(F, m) for m in ("nn", "tensor", "math", "elemwise", "loss",
                                             "metric", "vision", "quantized", "utils")]:
    for name in sorted(getattr(space, "__all__", None) or dir(space)):
        value = getattr(space, name, None)
        if inspect.isfunction(value) and not name.startswith("_"):
            functional.setdefault(name, value.__module__)
out = {
    "graph": graph_lines(graph),
    "block_graph": graph_lines(tm.block.graph),
    "call_methods": [str(e) for e in graph.get_method_by_type("__call__").as_list()],
    "all_methods": [str(e) for e in graph.get_method_by_type().as_list()],
    "sum_args": [len(sums[0].args), repr(sums[0].args[1:]), sorted(sums[0].kwargs)],
    "dep_exprs": [str(e) for e in graph.get_dep_exprs(graph.outputs[1])],
    "functional_modules": functional,
}
with open("megengine_facts.json", "w") as f:
    json.dump(out, f, indent=1)
print(json.dumps({k: v for k, v in out.items() if k != "functional_modules"}, indent=1))
