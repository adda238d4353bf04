"""Golden eager training runs from MegEngine 1.13 (run in the megref chroot:
/work/shared/megref/mpy tests/data/make_megengine_training.py): for each run of
training_cases.RUNS, 100 steps of GradManager + optimizer on fixed batches with
cross-entropy; the loss of every step, the final parameters and BatchNorm statistics.
Writes megengine_training.npz."""
import os
import sys

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
import megengine.optimizer as optim
from megengine.autodiff import GradManager

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from training_cases import RUNS, STEPS, build, data, initial_state  # noqa: E402

out = {}
for case, kind, opt_name, kwargs in RUNS:
    net = build(kind, M, F)
    init = initial_state(kind, net)
    net.load_state_dict(init, strict=False)
    net.train()
    gm = GradManager().attach(net.parameters())
    opt = getattr(optim, opt_name)(net.parameters(), **kwargs)
    batches = data(kind)
    losses = []
    for step in range(STEPS):
        x, label = batches[step % len(batches)]
        with gm:
            loss = F.nn.cross_entropy(net(mge.tensor(x)), mge.tensor(label))
            gm.backward(loss)
        opt.step().clear_grad()
        losses.append(float(loss.numpy()))
    out[f"{case}/losses"] = np.array(losses, np.float32)
    for name, value in net.state_dict().items():
        out[f"{case}/final/{name}"] = np.asarray(value)
np.savez_compressed(os.path.join(HERE, "megengine_training.npz"), **out)
print("wrote", len(out), "arrays", {k: v[[0, -1]] for k, v in out.items() if k.endswith("losses")})
