"""A whole training step (forward, GradManager.backward, optimizer update) inside
`trace`: the backward ops are recorded like any op, the graph is compiled, and the
parameters and optimizer states the step updates in place take their new values on every
call (record, replay, without_host), as in eager mode."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.optimizer as optim
from megtrace.autodiff import GradManager
from megtrace.jit import trace


class _Net(M.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = M.Linear(6, 8), M.Linear(8, 3)

    def forward(self, x):
        return self.fc2(F.tanh(self.fc1(x)))


def _trainer(net, traced, **trace_kwargs):
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x, label):
        with gm:
            loss = F.nn.cross_entropy(net(x), label)
            gm.backward(loss)
            opt.step().clear_grad()
        return loss
    return trace(step, **trace_kwargs) if traced else step


def _data(rng):
    return (mge.tensor(rng.standard_normal((5, 6)).astype("float32")),
            mge.tensor(rng.integers(0, 3, 5).astype("int32")))


@pytest.mark.parametrize("kwargs", [{"symbolic": False}, {"symbolic": True}],
                         ids=["eager-record", "symbolic"])
def test_traced_training_steps_match_eager(kwargs, rng):
    batches = [_data(rng) for _ in range(4)]
    eager_net, traced_net = _Net(), _Net()
    traced_net.load_state_dict(eager_net.state_dict())
    eager_step = _trainer(eager_net, traced=False)
    traced_step = _trainer(traced_net, traced=True, **kwargs)
    for x, label in batches:
        want, got = eager_step(x, label), traced_step(x, label)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    for (name, p), q in zip(eager_net.named_parameters(), traced_net.parameters()):
        assert q._var is None and q._owner is None, name     # plain tensors again
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_gradient_returned_from_a_trace():
    x0 = mge.tensor(np.arange(12, dtype="float32").reshape(3, 4))
    x1 = mge.tensor(np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4))
    gm = GradManager().attach(x0)

    @trace(symbolic=True, capture_as_const=True)
    def f(a, b):
        with gm:
            y = a * b
            gm.backward(y, F.ones_like(y))
            return y, a.grad

    for _ in range(2):
        x0.grad = None
        y, dx0 = f(x0, x1)
        np.testing.assert_equal(dx0.numpy(), x1.numpy())
    graph = f.graph
    assert len(graph.outputs) == 2


@pytest.mark.parametrize("symbolic", [False, True])
def test_gradients_left_in_grad_are_readable_after_the_trace(symbolic, rng):
    """backward inside the trace, the optimizer step outside it (MegEngine's xornet)."""
    batches = [_data(rng) for _ in range(3)]
    eager_net, traced_net = _Net(), _Net()
    traced_net.load_state_dict(eager_net.state_dict())
    for net, traced in ((eager_net, False), (traced_net, True)):
        gm = GradManager().attach(net.parameters())
        opt = optim.SGD(net.parameters(), lr=0.1)

        def backward_only(x, label, net=net, gm=gm):
            with gm:
                loss = F.nn.cross_entropy(net(x), label)
                gm.backward(loss)
            return loss
        step = trace(backward_only, symbolic=symbolic) if traced else backward_only
        for x, label in batches:
            opt.clear_grad()
            step(x, label)
            grads = [p.grad for p in net.parameters()]
            assert all(g is not None and g._owner is None for g in grads)
            opt.step()
    for p, q in zip(eager_net.parameters(), traced_net.parameters()):
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-5, atol=1e-6)


def test_frozen_batchnorm_gets_no_gradient():
    bn = M.BatchNorm2d(3, freeze=True)
    x = mge.tensor(np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype("float32"))
    gm = GradManager().attach(bn.parameters())
    with gm:
        gm.backward(bn(x).mean())
    assert bn.weight.grad is None and bn.bias.grad is None
