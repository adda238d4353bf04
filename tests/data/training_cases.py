"""The small networks and fixed data that tests/data/make_megengine_training.py trains in
real MegEngine and tests/test_training.py trains in megtrace (both eager): shared here so
both build the same model. `nn` is megengine or megtrace (its module/functional)."""
import numpy as np

STEPS = 100
BATCHES = 4          # the data cycles through this many fixed batches


SHAPES = {"cnn": (8, 1, 8, 8), "mlp": (8, 16), "transformer": (4, 6, 8)}


def data(kind):
    """[(x, label)] batches, 3 classes: 8 images 1x8x8 (cnn), 8 vectors of 16 (mlp) or 4
    sequences of 6 tokens of width 8 (transformer)."""
    rng = np.random.RandomState(31)
    shape = SHAPES[kind]
    return [(rng.randn(*shape).astype("float32"),
             rng.randint(0, 3, size=shape[0]).astype("int32"))
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
    elif kind == "transformer":
        return _encoder_classifier(M, F)
    else:
        class Net(M.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = M.Linear(16, 32)
                self.fc2 = M.Linear(32, 3)

            def forward(self, x):
                return self.fc2(F.relu(self.fc1(x)))
    return Net()


def _encoder_classifier(M, F, width=8, heads=2, hidden=16, classes=3):
    """One pre-norm transformer encoder block (hand-written multi-head self-attention:
    MegEngine 1.13's M.MultiHeadAttention runs on CUDA only; LayerNorm; GELU MLP; both
    residuals; no dropout), mean-pooled over tokens, then a linear classifier."""
    head_dim = width // heads

    class Encoder(M.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = M.LayerNorm(width)
            self.query = M.Linear(width, width)
            # no key bias: softmax cancels it (q.b is the same for every key), so its
            # gradient is rounding noise that Adam would scale up to full steps
            self.key = M.Linear(width, width, bias=False)
            self.value = M.Linear(width, width)
            self.proj = M.Linear(width, width)
            self.ln2 = M.LayerNorm(width)
            self.fc1 = M.Linear(width, hidden)
            self.fc2 = M.Linear(hidden, width)
            self.head = M.Linear(width, classes)

        def attention(self, x):
            n, length = x.shape[0], x.shape[1]

            def split_heads(y):                           # (n, heads, length, head_dim)
                return y.reshape(n, length, heads, head_dim).transpose(0, 2, 1, 3)
            q, k, v = split_heads(self.query(x)), split_heads(self.key(x)), \
                split_heads(self.value(x))
            scores = F.matmul(q, k, transpose_b=True) / float(np.sqrt(head_dim))
            out = F.matmul(F.softmax(scores, axis=-1), v)  # (n, heads, length, head_dim)
            return self.proj(out.transpose(0, 2, 1, 3).reshape(n, length, width))

        def forward(self, x):
            x = x + self.attention(self.ln1(x))
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return self.head(F.mean(x, axis=1))
    return Encoder()


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
    ("transformer_adam", "transformer", "Adam", {"lr": 1e-3}),
    ("transformer_adamw", "transformer", "AdamW", {"lr": 1e-3, "weight_decay": 1e-2}),
    ("transformer_sgd", "transformer", "SGD", {"lr": 0.01, "momentum": 0.9,
                                                "weight_decay": 1e-4}),
]
