"""A traced training step replayed: the parameters, momentum buffers and BatchNorm
statistics it assigns every call, and the optimizer's hyper-parameters, are inputs fed
to the compiled graph on every call (MegEngine's External vars), so Replayer.record's
inline check accepts them, not the full `_check`. Reference: the same step run eagerly
(NumPy kernels), and the full check's MegEngine errors for what the inline check must
not accept."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.optimizer as optim
from megtrace.autodiff import GradManager
from megtrace.jit import TraceError, trace


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.bn, self.fc2 = M.Linear(4, 3), M.BatchNorm1d(3), M.Linear(3, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))


def _setup(traced: bool):
    """A net with fixed initial values, its SGD (momentum, weight decay) and a step."""
    net = Net()
    rng = np.random.RandomState(0)
    for p in net.parameters():
        p[...] = rng.randn(*p.shape).astype("float32")
    net.train()
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-2)

    def step(x, y):
        with gm:
            loss = ((net(x) - y) ** 2).mean()
            gm.backward(loss)
        opt.step().clear_grad()
        return loss
    return net, opt, (trace(symbolic=True)(step) if traced else step)


def _batch(i: int):
    rng = np.random.RandomState(100 + i)
    return (mge.tensor(rng.randn(8, 4).astype("float32")),
            mge.tensor(rng.randn(8, 2).astype("float32")))


def _state(net: Net, opt) -> list[np.ndarray]:
    """Parameters, BatchNorm's running statistics and the momentum buffers."""
    values = [p.numpy() for p in net.parameters()]
    values += [net.bn.running_mean.numpy(), net.bn.running_var.numpy()]
    values += [opt._state[p]["momentum_buffer"].numpy() for p in net.parameters()]
    return values


def _assert_close(got: list, want: list) -> None:
    """TVM's kernels against NumPy's, compounded over a few steps."""
    for i, (g, w) in enumerate(zip(got, want)):
        assert rel_err(g, w) <= 1e-4, i


def test_sgd_step_replays_updated_parameters_inline(request):
    """Every replayed op of the step passes the inline check although the step changed
    every parameter, buffer and statistic it reads, and the values follow the eager
    step's over several steps."""
    net, opt, step = _setup(traced=True)
    ref_net, ref_opt, ref_step = _setup(traced=False)
    step(*_batch(0))
    ref_step(*_batch(0))
    calls = request.getfixturevalue("full_checks")      # counted from here on
    for i in range(1, 5):
        loss = step(*_batch(i))
        want = ref_step(*_batch(i))
        assert rel_err(loss.numpy(), want.numpy()) <= 1e-5, i
        _assert_close(_state(net, opt), _state(ref_net, ref_opt))
    assert calls == []


def test_parameter_changed_outside_the_trace_is_fed(request):
    """A parameter given a new value between calls (the same object, or another
    Parameter in its place): the next call computes with it, as the eager step does,
    and still on the inline check."""
    net, opt, step = _setup(traced=True)
    ref_net, ref_opt, ref_step = _setup(traced=False)
    for i in range(2):
        step(*_batch(i))
        ref_step(*_batch(i))
    calls = request.getfixturevalue("full_checks")      # counted from here on
    for n in (net, ref_net):
        n.fc1.bias[...] = mge.tensor(np.full(3, 0.5, np.float32))
        n.bn.running_var[...] = n.bn.running_var * 4
    for i in range(2, 4):
        step(*_batch(i))
        ref_step(*_batch(i))
        _assert_close(_state(net, opt), _state(ref_net, ref_opt))
    assert calls == []


def test_parameter_of_another_shape_still_raises(request):
    """An outside tensor of another shape than traced: the inline check declines it and
    the full check raises MegEngine's error."""
    net, _, step = _setup(traced=True)
    for i in range(2):
        step(*_batch(i))
    calls = request.getfixturevalue("full_checks")      # counted from here on
    net.fc1.bias._reset(mge.tensor(np.zeros(4, np.float32)))
    with pytest.raises(TraceError, match="shape mismatch"):
        step(*_batch(2))
    assert calls == ["add"]             # fc1's bias add: declined inline
