"""Small training models written against MegEngine's API, run by both MegEngine 1.13
(make_megengine_autodiff_grads.py makes the golden gradients) and megtrace
(tests/autodiff/test_golden_grads.py): `lib` is the megengine or the megtrace package."""
import numpy as np


def _set_weights(module, rng):
    """Deterministic parameters (same on both sides): normal(0, 0.3) in named order."""
    for _, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
        p[...] = rng.normal(0, 0.3, size=p.shape).astype("float32")


def mlp(lib, rng):
    M, F = lib.module, lib.functional

    class MLP(M.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = M.Linear(10, 16)
            self.norm = M.LayerNorm(16)
            self.fc2 = M.Linear(16, 4)

        def forward(self, x, label):
            h = F.gelu(self.norm(self.fc1(x)))
            h = F.sigmoid(h) * F.tanh(h) + F.relu(h) * 0.5
            logits = self.fc2(h)
            return F.nn.cross_entropy(logits, label)

    net = MLP()
    _set_weights(net, rng)
    x = rng.normal(size=(8, 10)).astype("float32")
    label = rng.integers(0, 4, size=(8,)).astype("int32")
    return net, (x, label)


def transformer(lib, rng):
    """One pre-norm self-attention block with a GELU MLP, mean of squares as loss."""
    M, F = lib.module, lib.functional
    heads, dim = 2, 8

    class Block(M.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = M.LayerNorm(dim), M.LayerNorm(dim)
            self.qkv = M.Linear(dim, 3 * dim)
            self.proj = M.Linear(dim, dim)
            self.fc1, self.fc2 = M.Linear(dim, 2 * dim), M.Linear(2 * dim, dim)

        def forward(self, x, target):
            b, t, _ = x.shape
            qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, dim // heads)
            qkv = qkv.transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = F.softmax(F.matmul(q, k, transpose_b=True) * float(1 / np.sqrt(dim // heads)),
                            axis=-1)
            y = F.matmul(att, v).transpose(0, 2, 1, 3).reshape(b, t, dim)
            x = x + self.proj(y)
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return ((x - target) ** 2).mean()

    net = Block()
    _set_weights(net, rng)
    x = rng.normal(size=(2, 5, dim)).astype("float32")
    target = rng.normal(size=(2, 5, dim)).astype("float32")
    return net, (x, target)


def cnn(lib, rng):
    """conv -> BatchNorm (training) -> relu -> max pool -> conv -> avg pool -> linear ->
    cross-entropy."""
    M, F = lib.module, lib.functional

    class CNN(M.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = M.Conv2d(3, 4, 3, padding=1)
            self.bn = M.BatchNorm2d(4)
            self.pool = M.MaxPool2d(2)
            self.conv2 = M.Conv2d(4, 6, 3, stride=1, padding=0)
            self.avg = M.AvgPool2d(2)
            self.fc = M.Linear(6, 3)

        def forward(self, x, label):
            h = self.pool(F.relu(self.bn(self.conv1(x))))
            h = self.avg(F.relu(self.conv2(h)))
            return F.nn.cross_entropy(self.fc(F.flatten(h, 1)), label)

    net = CNN()
    _set_weights(net, rng)
    x = rng.normal(size=(2, 3, 8, 8)).astype("float32")
    label = rng.integers(0, 3, size=(2,)).astype("int32")
    return net, (x, label)


MODELS = {"mlp": mlp, "transformer": transformer, "cnn": cnn}


def gradients(lib, name):
    """(loss, {param name or "input": gradient}) of model `name`, one training step."""
    rng = np.random.default_rng(1234)
    net, (x, aux) = MODELS[name](lib, rng)
    net.train()
    inp = lib.tensor(x)
    gm = lib.autodiff.GradManager().attach(list(net.parameters()) + [inp])
    with gm:
        loss = net(inp, lib.tensor(aux))
        gm.backward(loss)
    grads = {n: p.grad.numpy() for n, p in net.named_parameters()}
    grads["input"] = inp.grad.numpy()
    return float(loss.numpy()), grads
