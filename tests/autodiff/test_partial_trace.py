"""partial_trace: forward and backward of one piece compiled as two traces; gradients
(of arguments and of the parameters it reads) equal eager autodiff's."""
import numpy as np
import pytest

from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.autodiff import GradManager
from megtrace.jit import partial_trace


class _Piece(M.Module):
    def __init__(self):
        super().__init__()
        self.w = mge.Parameter([[0.5, -1.0], [2.0, 0.25]])
        self.b = mge.Parameter([0.1, -0.2])

    def forward(self, x):
        return F.tanh(F.matmul(x, self.w) + self.b), F.exp(x * self.b)


class _TracedPiece(_Piece):
    forward = partial_trace(_Piece.forward)        # one trace object, replayed per call


@pytest.mark.parametrize("attach_input", [False, True])
def test_gradients_match_eager(attach_input):
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((3, 2)).astype("float32") for _ in range(3)]
    results = {}
    for traced in (False, True):
        net = _TracedPiece() if traced else _Piece()
        gm = GradManager().attach(net.parameters())
        grads = []
        for d in data:
            x = mge.tensor(d)
            if attach_input:
                gm.attach(x)
            with gm:
                y, z = net(x * 2)
                gm.backward((y * y).sum() + z.mean())
            grads.append([net.w.grad.numpy(), net.b.grad.numpy()] +
                         ([x.grad.numpy()] if attach_input else []))
            net.w.grad = net.b.grad = None
        results[traced] = grads
    # the compiled tanh/exp are fast_math's polynomials (~1e-6 relative, libm's ~1e-7);
    # tanh's derivative 1 - y*y of a saturated y multiplies that error by y*y / (1 - y*y)
    for want, got in zip(results[False], results[True]):
        for w, g in zip(want, got):
            assert rel_err(g, w) <= 1e-4


def test_without_grad_manager_it_is_a_trace():
    f = partial_trace(lambda a, b: a * b + a / b)
    a, b = mge.tensor([1.0, 2.0]), mge.tensor([4.0, 8.0])
    for _ in range(2):
        np.testing.assert_allclose(f(a, b).numpy(), [4.25, 16.25])


def test_only_without_host_mode():
    with pytest.raises(AssertionError, match="without_host"):
        partial_trace(lambda x: x, without_host=False)
