"""Every call of a trace returns the same values for the same inputs: the first
(recording) call included, symbolic or not (MegEngine runs one set of kernels in both
modes, so its test_output_copy_trace compares traced training steps exactly)."""
import numpy as np
import pytest

import megtrace.functional as F
import megtrace.optimizer as optim
from megtrace import Parameter, tensor
from megtrace.autodiff import GradManager
from megtrace.jit import trace
from megtrace.module import Module


class _Exp(Module):
    def __init__(self):
        super().__init__()
        self.a = Parameter([1.0], dtype=np.float32)

    def forward(self, x):
        return F.exp(x * self.a)


def _train_steps(symbolic: bool, steps: int = 3):
    net = _Exp()
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), 1e-3, momentum=0.9)

    @trace(symbolic=symbolic)
    def step(d):
        with gm:
            loss = net(d)
            gm.backward(loss)
            opt.step().clear_grad()
        return loss

    data = tensor(np.arange(4, dtype=np.float32).reshape(2, 2))
    return [step(data).numpy() for _ in range(steps)], net.a.numpy()


def test_traced_training_steps_agree_exactly_in_both_modes():
    eager_first, a_eager = _train_steps(symbolic=False)
    symbolic_first, a_symbolic = _train_steps(symbolic=True)
    for got, want in zip(eager_first, symbolic_first):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a_eager, a_symbolic)
    # independent NumPy reference of the first step (a = 1 before it)
    x = np.arange(4, dtype=np.float64).reshape(2, 2)
    np.testing.assert_allclose(eager_first[0], np.exp(x), rtol=1e-6)
    # SGD with momentum 0.9, lr 1e-3, d loss/d a = sum(x * exp(x a)) (loss summed by backward)
    a, v = 1.0, 0.0
    for _ in range(3):
        g = np.sum(x * np.exp(x * a))
        v = 0.9 * v + g
        a -= 1e-3 * v
    np.testing.assert_allclose(a_eager, [a], rtol=1e-5)


@pytest.mark.parametrize("symbolic", [False, True])
def test_first_call_equals_later_calls_bit_for_bit(symbolic):
    @trace(symbolic=symbolic)
    def f(x):
        return F.exp(x) + F.log(x + 4) * F.sin(x)

    x = tensor(np.linspace(-3, 3, 257, dtype=np.float32))
    first = f(x).numpy()
    for _ in range(2):
        np.testing.assert_array_equal(f(x).numpy(), first)
    xs = np.linspace(-3, 3, 257, dtype=np.float64)
    np.testing.assert_allclose(first, np.exp(xs) + np.log(xs + 4) * np.sin(xs), rtol=1e-5,
                               atol=1e-6)


def test_values_read_after_the_first_call_stay_readable():
    w = Parameter(np.array([0.5, 2.0], dtype=np.float32))
    gm = GradManager().attach([w])

    @trace
    def f(x):
        with gm:
            y = F.exp(x * w).sum()
            gm.backward(y)
        return y

    x = np.array([1.0, -1.0], dtype=np.float32)
    for _ in range(3):
        w.grad = None
        f(tensor(x))
        np.testing.assert_allclose(w.grad.numpy(), x * np.exp(x * np.array([0.5, 2.0])),
                                   rtol=1e-6)
