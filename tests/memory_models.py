"""A deep MLP training step whose activations dominate its memory, for the tests of
trace's memory options (test_memory_options.py runs it in-process and in a subprocess)."""
import numpy as np

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.optimizer as optim
from megtrace.autodiff import GradManager
from megtrace.jit import trace

DEPTH, WIDTH, BATCH = 12, 128, 2048


class DeepMLP(M.Module):
    def __init__(self, depth=DEPTH, width=WIDTH):
        super().__init__()
        self.layers = [M.Linear(width, width) for _ in range(depth)]
        self.head = M.Linear(width, 10)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)


def activation_bytes(depth=DEPTH, width=WIDTH, batch=BATCH) -> int:
    """What the backward pass keeps without recomputation: each layer's ReLU output
    (the next layer's input and ReLU's own gradient rule read it)."""
    return depth * batch * width * 4


def training_step(seed=1, **trace_options):
    """(traced step, net, x, label): SGD on DeepMLP from fixed weights and data."""
    rs = np.random.RandomState(seed)
    net = DeepMLP()
    for p in net.parameters():
        p._set_value(rs.standard_normal(p.shape).astype("float32") * 0.1)
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    @trace(symbolic=True, **trace_options)
    def step(x, label):
        with gm:
            loss = F.nn.cross_entropy(net(x), label)
            gm.backward(loss)
        grads = [p.grad * 1 for p in net.parameters()]
        opt.step().clear_grad()
        return (loss, *grads)

    x = mge.tensor(rs.standard_normal((BATCH, WIDTH)).astype("float32"))
    label = mge.tensor(rs.randint(0, 10, BATCH).astype("int32"))
    return step, net, x, label


def compiled_of(step):
    """The (graph, CompiledGraph) the trace built."""
    (entry,) = step._entries.values()
    return entry.compiled
