"""complex64 (F.polar, F.complex, F.real, F.imag) against NumPy; eager only, and a trace
refuses complex values with a clear error."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.autodiff import GradManager
from megtrace.errors import DTypeError, TraceError
from megtrace.jit import trace

RNG = np.random.default_rng(3)


def test_polar_matches_numpy():
    r, a = RNG.random((2, 3, 4)), RNG.random((2, 3, 4)) * 6 - 3
    z = F.polar(mge.tensor(r), mge.tensor(a))
    assert z.dtype == np.complex64 and z.shape == (2, 3, 4)
    np.testing.assert_allclose(z.numpy(), r * np.cos(a) + r * np.sin(a) * 1j, rtol=1e-6,
                               atol=1e-7)


def test_complex_real_imag_round_trip():
    re, im = RNG.standard_normal((3, 5)).astype(np.float32), \
        RNG.standard_normal((3, 5)).astype(np.float32)
    z = F.complex(mge.tensor(re), mge.tensor(im))
    np.testing.assert_array_equal(z.numpy(), re + 1j * im)
    np.testing.assert_array_equal(F.real(z).numpy(), re)
    np.testing.assert_array_equal(F.imag(z).numpy(), im)
    assert F.real(z).dtype == np.float32


def test_numpy_complex128_narrows_to_complex64():
    t = mge.tensor(np.array([1 + 2j, -3j]))
    assert t.dtype == np.complex64
    np.testing.assert_array_equal(t.numpy(), np.array([1 + 2j, -3j], np.complex64))


def test_gradients_through_polar():
    r, a = RNG.random(6).astype(np.float32), RNG.random(6).astype(np.float32)
    cr, ci = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    rt, at = mge.Parameter(r), mge.Parameter(a)
    gm = GradManager().attach([rt, at])
    with gm:
        z = F.polar(rt, at)
        loss = (F.real(z) * mge.tensor(cr) + F.imag(z) * mge.tensor(ci)).sum()
        gm.backward(loss)
    # loss = sum(cr r cos a + ci r sin a)
    np.testing.assert_allclose(rt.grad.numpy(), cr * np.cos(a) + ci * np.sin(a), rtol=1e-5)
    np.testing.assert_allclose(at.grad.numpy(), -cr * r * np.sin(a) + ci * r * np.cos(a),
                               rtol=1e-5, atol=1e-6)


def test_parts_of_a_real_tensor_are_refused():
    with pytest.raises(DTypeError, match="complex64"):
        F.real(mge.tensor(np.ones(3, np.float32)))


@pytest.mark.parametrize("symbolic", [False, True])
def test_trace_refuses_complex_values(symbolic):
    @trace(symbolic=symbolic)
    def f(r, a):
        return F.real(F.polar(r, a))

    with pytest.raises(TraceError, match="complex tensors cannot be traced"):
        f(mge.tensor(np.ones(3, np.float32)), mge.tensor(np.zeros(3, np.float32)))
