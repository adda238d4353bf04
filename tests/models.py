"""Small MegEngine-style models used across the tests (only the imports differ)."""
import megtrace.functional as F
import megtrace.module as M
from megtrace.demo import Net


class MLP(M.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = M.Linear(64, 128)
        self.fc2 = M.Linear(128, 64)
        self.fc3 = M.Linear(64, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


# The conv net of the vertical-slice issue is the demo's model.
ConvNet = Net


def randomize_bn(net, rng):
    """Give BatchNorm layers non-trivial statistics so that they matter in comparisons."""
    for m in net.modules():
        if isinstance(m, M.BatchNorm2d):
            shape = m.running_mean.shape
            m.running_mean._set_value(rng.normal(size=shape))
            m.running_var._set_value(rng.uniform(0.5, 2.0, size=shape))
            m.weight._set_value(rng.uniform(0.5, 1.5, size=shape))
            m.bias._set_value(rng.normal(size=shape) * 0.1)
    return net


class GapNet(M.Module):
    """Depthwise conv, ReLU6 as maximum/minimum, global mean (Reduce + AxisAddRemove)."""

    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 8, 3, stride=2, padding=1)
        self.dw = M.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = M.Linear(8, 5)

    def forward(self, x):
        x = F.minimum(F.maximum(self.dw(F.relu(self.conv(x))), 0.0), 6.0)
        return self.fc(F.mean(x, axis=(2, 3)))
