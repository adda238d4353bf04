"""The small networks and fixed data that tests/data/make_megengine_training.py trains in
real MegEngine and tests/test_training.py trains in megtrace (both eager): shared here so
both build the same model. `nn` is megengine or megtrace (its module/functional)."""
import numpy as np

STEPS = 100
BATCHES = 4          # the data cycles through this many fixed batches


def data(kind):
    """[(x, label)] batches: 8 images 1x8x8 (cnn) or 8 vectors of 16 (mlp), 3 classes."""
    rng = np.random.RandomState(31)
    shape = (8, 1, 8, 8) if kind == "cnn" else (8, 16)
    return [(rng.randn(*shape).astype("float32"), rng.randint(0, 3, size=8).astype("int32"))
            for _ in range(BATCHES)]


def build(kind, M, F):
    """The network class for `kind` built with module package M and functional F."""
    if kind == "cnn":
        class Net(M.Module):
            def __init__(self):
                super().__init__()
                # no conv bias: BatchNorm cancels it, so its gradient is rounding noise,
                # which Adam would scale up to full steps (not comparable across engines)
                self.conv = M.Conv2d(1, 4, 3, padding=1, bias=False)
                self.bn = M.BatchNorm2d(4)
                self.pool = M.MaxPool2d(2)
                self.fc = M.Linear(4 * 4 * 4, 3)

            def forward(self, x):
                x = self.pool(F.relu(self.bn(self.conv(x))))
                return self.fc(F.flatten(x, 1))
    else:
        class Net(M.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = M.Linear(16, 32)
                self.fc2 = M.Linear(32, 3)

            def forward(self, x):
                return self.fc2(F.relu(self.fc1(x)))
    return Net()


def initial_state(kind, net):
    """Deterministic initial weights (name -> array) for `net`'s parameters."""
    rng = np.random.RandomState(17)
    return {name: (rng.randn(*p.shape) * 0.3).astype("float32")
            for name, p in sorted(net.named_parameters())}


# (case, network, optimizer class, optimizer kwargs)
RUNS = [
    ("mlp_sgd", "mlp", "SGD", {"lr": 0.01, "momentum": 0.9, "weight_decay": 1e-4}),
    ("mlp_adam", "mlp", "Adam", {"lr": 1e-3}),
    ("cnn_sgd", "cnn", "SGD", {"lr": 0.01, "momentum": 0.9, "weight_decay": 1e-4}),
    ("cnn_adam", "cnn", "Adam", {"lr": 1e-3}),
]
