"""The benchmarked models on the megtrace side: names, input shapes, how to build them.

ResNet-18, MobileNetV2 and the encoder block come from tests/zoo.py; the MLP is a
larger one than tests/models.py's (784-1024-512-10), so that its latency is not all
call overhead. bench/torch_models.py mirrors each with the same parameter names."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT), str(ROOT / "tests")):
    if p not in sys.path:
        sys.path.insert(0, p)

import megtrace.functional as F  # noqa: E402
import megtrace.module as M  # noqa: E402


class BenchMLP(M.Module):
    def __init__(self, sizes=(784, 1024, 512, 10)):
        super().__init__()
        self.fc1 = M.Linear(sizes[0], sizes[1])
        self.fc2 = M.Linear(sizes[1], sizes[2])
        self.fc3 = M.Linear(sizes[2], sizes[3])

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


@dataclass(frozen=True)
class Spec:
    name: str
    make: Callable[[], M.Module]
    sample: tuple[int, ...]          # input shape without the batch

    def shape(self, batch: int) -> tuple[int, ...]:
        return (batch,) + self.sample


def _zoo(name):
    import zoo
    return getattr(zoo, name)


MODELS = {
    "mlp": Spec("mlp", BenchMLP, (784,)),
    "resnet18": Spec("resnet18", lambda: _zoo("ResNet18")(1000), (3, 224, 224)),
    "mobilenetv2": Spec("mobilenetv2", lambda: _zoo("MobileNetV2")(1000), (3, 224, 224)),
    "encoder": Spec("encoder", lambda: _zoo("EncoderBlock")(768, 12, 3072), (128, 768)),
}


def build(name: str, seed: int = 0):
    """The model with seeded weights and non-trivial BatchNorm statistics, in eval mode."""
    import numpy as np
    np.random.seed(seed)                       # megtrace's initializers use np.random
    net = MODELS[name].make()
    _zoo("randomize_bn")(net, np.random.default_rng(seed))
    return net.eval()


def graph_flops(graph) -> int:
    """2 x multiply-adds of every conv2d and matmul node (what GFLOP/s counts)."""
    import numpy as np
    total = 0
    for node in graph.nodes:
        out = node.outputs[0].type
        if node.op.name == "conv2d":
            total += 2 * out.size * int(np.prod(node.inputs[1].type.shape[-3:]))
        elif node.op.name == "matmul":
            a = node.inputs[0].type
            k = a.shape[-2] if node.kwargs.get("transpose_a") else a.shape[-1]
            total += 2 * out.size * k
    return total
