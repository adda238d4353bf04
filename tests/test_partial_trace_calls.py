"""megtrace.jit.partial_trace (MegEngine 1.13's): forward and backward of a block run
compiled; gradients checked against derivatives worked out by hand in NumPy."""
import numpy as np
import pytest

import megtrace.functional as F
import megtrace.optimizer as optim
from megtrace import Parameter, tensor
from megtrace.autodiff import GradManager
from megtrace.jit import partial_trace
from megtrace.module import Module


class _Block(Module):
    def __init__(self):
        super().__init__()
        self.a = Parameter([1.0], dtype=np.float32)
        self.b = Parameter([2.0], dtype=np.float32)

    @partial_trace
    def forward(self, x):
        return F.exp(x * self.a + x / self.b)


def _reference(x, a=1.0, b=2.0):
    """y = 2 exp(3x a + 3x / b) and its gradients wrt a, b (x enters as 3x)."""
    u = 3 * x
    e = np.exp(u * a + u / b)
    return 2 * e, np.sum(2 * e * u), np.sum(2 * e * (-u / b ** 2))


def _step(block, gm, x):
    with gm:
        y = block(tensor(x) * 3) * 2
        gm.backward(y)
    grads = block.a.grad.numpy(), block.b.grad.numpy()
    block.a.grad = block.b.grad = None
    return y.numpy(), grads


def test_forward_and_backward_match_numpy_and_every_call_agrees():
    block = _Block()
    gm = GradManager().attach(block.parameters())
    x = np.float32(0.5)
    y0, (da0, db0) = _step(block, gm, x)
    y_ref, da_ref, db_ref = _reference(np.float64(x))
    np.testing.assert_allclose(y0, y_ref, rtol=1e-6)
    np.testing.assert_allclose(da0, [da_ref], rtol=1e-6)
    np.testing.assert_allclose(db0, [db_ref], rtol=1e-6)
    for _ in range(3):
        y, (da, db) = _step(block, gm, x)
        np.testing.assert_array_equal(y, y0)
        np.testing.assert_array_equal(da, da0)
        np.testing.assert_array_equal(db, db0)


def test_gradient_of_a_tensor_argument_and_changed_parameters():
    @partial_trace
    def f(p, q):
        return p * q + p / q

    p = Parameter(np.array([1.0, 3.0], dtype=np.float32))
    q = tensor(np.array([2.0, 4.0], dtype=np.float32))
    gm = GradManager().attach([p])
    opt = optim.SGD([p], lr=0.5)
    seen = []
    for _ in range(3):          # the SGD step changes p between calls
        pv = p.numpy().astype(np.float64)
        seen.append(pv)
        with gm:
            out = f(p, q)
            gm.backward(out.sum())
        qv = np.array([2.0, 4.0])
        np.testing.assert_allclose(out.numpy(), pv * qv + pv / qv, rtol=1e-6)
        np.testing.assert_allclose(p.grad.numpy(), qv + 1 / qv, rtol=1e-6)
        opt.step().clear_grad()
    assert not np.array_equal(seen[0], seen[-1])


def test_forward_only_outside_a_grad_manager():
    @partial_trace
    def f(a, b):
        return a * b + a / b

    a, b = np.float32([3.0]), np.float32([4.0])
    for _ in range(3):
        np.testing.assert_allclose(f(tensor(a), tensor(b)).numpy(), a * b + a / b, rtol=1e-6)


def test_rejects_what_megengine_rejects():
    with pytest.raises(AssertionError, match="only support without_host mode"):
        partial_trace(lambda x: x, without_host=False)
    with pytest.raises(AssertionError):
        partial_trace(lambda x: x, backend="nope")
