"""Fixtures shared by the perf tests."""
import numpy as np
import pytest
from models import ConvNet

import megtrace as mge
from megtrace.jit import trace


@pytest.fixture
def convnet_graph(rng):
    """A ConvNet's recorded graph (weights as constants), its input and the eager output:
    a small model with conv, pool and dense kernels for the build tests."""
    net = ConvNet().eval()
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True, record_only=True)
    f(mge.tensor(x))
    return f.graph, x, net(mge.tensor(x)).numpy()
