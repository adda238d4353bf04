"""Golden amp training from real MegEngine 1.13: a conv/BN/linear net trained 3 SGD steps
under `amp.autocast()` with a `GradScaler` (losses, logits dtype, final weights and the
scaler's state), from fixed weights and data.

Run with the megref chroot from the project root:
    /work/shared/megref/mpy tests/data/make_megengine_amp_training.py
"""
from pathlib import Path

import numpy as np

import megengine as mge
import megengine.amp as amp
import megengine.functional as F
import megengine.module as M
import megengine.optimizer as optim
from megengine.autodiff import GradManager

HERE = Path(__file__).parent


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 8, 3, padding=1)
        self.bn = M.BatchNorm2d(8)
        self.fc = M.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(F.flatten(F.relu(self.bn(self.conv(x))), 1))


def main():
    rng = np.random.default_rng(11)
    net = Net()
    init = {k: rng.standard_normal(v.shape).astype(np.float32) * 0.1
            for k, v in net.state_dict().items() if k.endswith(("weight", "bias"))}
    net.load_state_dict(init, strict=False)
    x = rng.random((4, 3, 8, 8)).astype(np.float32)
    y = np.array([0, 3, 5, 9], np.int32)
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    scaler = amp.GradScaler(init_scale=1024.0, growth_interval=2)
    out = {f"init/{k}": v for k, v in init.items()}
    out["x"], out["y"] = x, y
    losses = []
    for _ in range(3):
        with amp.autocast():
            with gm:
                logits = net(mge.tensor(x))
                loss = F.nn.cross_entropy(logits, mge.tensor(y))
                scaler.backward(gm, loss)
        opt.step().clear_grad()
        losses.append(loss.numpy())
        out["logits_dtype"] = np.array(str(logits.dtype))
    out["losses"] = np.array(losses, np.float32)
    out["scale_factor"] = np.float32(scaler.scale_factor)
    for k, v in net.state_dict().items():
        out[f"final/{k}"] = v.numpy() if hasattr(v, "numpy") else np.asarray(v)
    np.savez(HERE / "megengine_amp_training.npz", **out)


main()
