"""A traced function called inside `with gm:` is differentiable (MegEngine 1.13 gives the
gradients of a traced call as of the eager one): it becomes one tape node whose backward
is a traced vector-Jacobian product. Reference: the analytic gradients in NumPy."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.amp import GradScaler
from megtrace.autodiff import GradManager
from megtrace.jit import trace


@pytest.mark.parametrize("symbolic", [False, True])
def test_gradients_of_arguments_and_read_parameters(symbolic):
    w = mge.Parameter(np.array([0.5, -1.0, 2.0], np.float32))

    @trace(symbolic=symbolic)
    def f(x, y):
        return (F.exp(x) * w + x * y).sum()

    gm = GradManager()
    rng = np.random.default_rng(0)
    for _ in range(3):
        xv, yv = rng.standard_normal((2, 3)).astype(np.float32)
        x, y = mge.tensor(xv), mge.tensor(yv)
        gm.attach([x, y, w])
        with gm:
            loss = f(x, y)
            gm.backward(loss)
        np.testing.assert_allclose(loss.numpy(), (np.exp(xv) * w.numpy() + xv * yv).sum(),
                                   rtol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), np.exp(xv) * w.numpy() + yv, rtol=1e-5)
        np.testing.assert_allclose(y.grad.numpy(), xv, rtol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), np.exp(xv), rtol=1e-5)
        w.grad = None


def test_outside_grad_manager_it_is_a_plain_trace():
    @trace(symbolic=True)
    def f(x):
        return x * 3

    x = mge.tensor(np.ones(2, np.float32))
    np.testing.assert_array_equal(f(x).numpy(), [3, 3])
    assert f._tape_node is None


@pytest.mark.parametrize("symbolic", [False, True])
def test_grad_scaler_with_a_traced_loss(symbolic):
    gm, scaler = GradManager(), GradScaler()

    @trace(symbolic=symbolic)
    def calc(x, y):
        return 2 * (x + 2 * y) + 1

    for _ in range(2):
        x = mge.tensor(np.random.random((1, 2, 3)).astype(np.float32))
        y = mge.tensor(np.random.random((1, 2, 3)).astype(np.float32))
        gm.attach([x, y])
        with gm:
            scaler.backward(gm, calc(x, y), unscale_grad=False)
        np.testing.assert_array_equal(x.grad.numpy(), 2 * scaler.scale_factor)
        np.testing.assert_array_equal(y.grad.numpy(), 4 * scaler.scale_factor)
        scaler.unscale(gm.attached_tensors())
        np.testing.assert_array_equal(x.grad.numpy(), 2)


def test_attaching_fresh_tensors_every_step():
    """MegEngine's GradScaler test pattern: new tensors attached on every call while the
    earlier ones die (their weak references drop them from the manager as it records)."""
    import gc
    gm = GradManager()

    @trace(symbolic=True)
    def f(x, y):
        return (x * y).sum()

    for i in range(20):
        x = mge.tensor(np.full(3, float(i), np.float32))
        y = mge.tensor(np.ones(3, np.float32))
        gm.attach([x, y])
        if i % 5 == 0:
            gc.collect()
        with gm:
            gm.backward(f(x, y))
        np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 1])
        np.testing.assert_array_equal(y.grad.numpy(), [i, i, i])
        assert all(t is not None for t in gm.attached_tensors())
