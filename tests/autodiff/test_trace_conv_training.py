"""Training steps of a small CNN inside `trace(symbolic=True)`: the backward passes of
convolution (dense, grouped, strided), max/average pooling, padding and advanced
indexing are recorded as registry ops, compiled by TVM, and match eager mode."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.optimizer as optim
from megtrace.autodiff import GradManager
from megtrace.jit import trace


class _ConvNet(M.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = M.Conv2d(3, 4, 3, padding=1)
        self.conv2 = M.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
        self.fc = M.Linear(6, 3)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 3, stride=2, padding=1)
        h = F.avg_pool2d(F.relu(self.conv2(F.nn.pad(h, ((0, 0), (0, 0), (1, 0), (0, 1))))), 2)
        h = F.flatten(h, 1)
        return self.fc(F.where(h > 0.05, h, h * 0.5))


def _trainer(net, traced):
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    def step(x, label):
        with gm:
            logits = net(x)
            picked = logits[mge.tensor(np.array([1, 0, 1, 1], "int32"))]
            loss = F.nn.cross_entropy(picked, label)
            gm.backward(loss)
            opt.step().clear_grad()
        return loss
    return trace(step, symbolic=True) if traced else step


class _WideNet(M.Module):
    """16- and 32-channel convs down to 2x2 and 1x1 maps: strided input gradients per
    output phase (transposed_conv._per_phase) and stacked conv tiles in the CPU rules."""

    def __init__(self):
        super().__init__()
        self.conv1 = M.Conv2d(3, 16, 3, padding=1)
        self.conv2 = M.Conv2d(16, 32, 3, stride=2, padding=1)
        self.conv3 = M.Conv2d(32, 32, 3, padding=1)
        self.conv4 = M.Conv2d(32, 32, 1, stride=2)
        self.fc = M.Linear(32, 3)

    def forward(self, x):
        h = F.relu(self.conv1(x))
        h = F.relu(self.conv2(h))
        h = F.relu(self.conv3(h) + h)
        h = self.conv4(h)
        return self.fc(F.flatten(h, 1))


@pytest.mark.parametrize("make, image", [(_ConvNet, 9), (_WideNet, 4)], ids=["conv", "wide"])
def test_traced_cnn_training_matches_eager(rng, make, image):
    batches = [(mge.tensor(rng.standard_normal((4, 3, image, image)).astype("float32")),
                mge.tensor(rng.integers(0, 3, 4).astype("int32"))) for _ in range(3)]
    eager_net, traced_net = make(), make()
    traced_net.load_state_dict(eager_net.state_dict())
    eager_step, traced_step = _trainer(eager_net, False), _trainer(traced_net, True)
    for x, label in batches:
        want, got = eager_step(x, label), traced_step(x, label)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    for (name, p), q in zip(eager_net.named_parameters(), traced_net.parameters()):
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)