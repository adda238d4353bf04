"""Run by test_crash_safety.py: write the same kind of file over and over (dump or
export) until killed; prints "ready" once the first complete file is in place."""
import sys

import numpy as np

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace

kind, path = sys.argv[1], sys.argv[2]


class Wide(M.Module):
    """Several MB of weights, so that a write takes long enough to be interrupted."""

    def __init__(self):
        super().__init__()
        self.fc1 = M.Linear(256, 2048)
        self.fc2 = M.Linear(2048, 512)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


net = Wide().eval()
infer = trace(lambda x: net(x), symbolic=True, capture_as_const=True)
infer(mge.tensor(np.ones((1, 256), np.float32)))
for i in range(1000):
    if kind == "dump":
        infer.dump(path, arg_names=["data"], output_names=["out"])
    elif kind == "tune":             # path: the tuning work_dir
        small = trace(lambda x: F.relu(net.fc1(x)), symbolic=True, capture_as_const=True)
        small(mge.tensor(np.ones((1, 256), np.float32)))
        if i == 0:
            print("ready", flush=True)
        mge.tune(small, work_dir=path, trials=4, base="default")
        continue
    else:
        mge.export(infer, path)
    if i == 0:
        print("ready", flush=True)
